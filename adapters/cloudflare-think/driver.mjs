//! Think as an engine of the live runner (issue 50's adapters/live/): what
//! the runner needs to drive the real Think in real time, in the protocol's
//! terms (docs/protocol.md). The runner owns the clock, the provider and
//! the tool endpoint; this driver owns workerd, the clients and the store.
//!
//! - `capabilities`: what the protocol's vocabulary says Think does here.
//!   `recovery` and `coalesce` are Think's; `dangling-call-repair` is agents'
//!   `repairInterruptedToolParts`. Not declared: `messenger` (Think's
//!   messengers are reached through a chat platform's webhook, not by the
//!   runner), `provider-retries` (opencode's take-back; Think routes a 5xx
//!   into recovery), `store-refusal-fails-turn` (workerd's SQLite cannot be
//!   made to refuse a write).
//! - `unsupported(config)`: the settings Think cannot take (settings.mjs);
//!   a scenario with any is not applicable, by capability.
//! - `start(...)` → a session: inputs in, frames out (`onFrame(connection,
//!   frame)`), the store read at any rest (`store()`), eviction (`evict()`:
//!   SIGKILL and a restart on the same disk), teardown (`stop()`).
//!
//! The tool endpoint's contract: Think's server tools POST
//! `{toolCallId, name, input}` to it and take `{output}` or `{error}` back.
import { ThinkRun } from "./think.mjs";
import { unsupported } from "./settings.mjs";

export const capabilities = ["recovery", "coalesce", "dangling-call-repair"];

export { unsupported };

/**
 * Starts Think for one run. `providerAddress` / `toolsAddress`: host:port
 * of the runner's OpenAI-compatible provider and tool endpoint.
 */
export async function start({ config, providerAddress, toolsAddress, onFrame, onLog = () => {} }) {
  const run = new ThinkRun({ config, providerAddress, toolsAddress, onLog });
  await run.start();
  return new ThinkSession(run, onFrame);
}

class ThinkSession {
  constructor(run, onFrame) {
    this.run = run;
    this.onFrame = onFrame;
  }

  async connect(connection) {
    await this.run.connect(String(connection), { onFrame: (frame) => this.onFrame(connection, frame) });
  }

  disconnect(connection) {
    this.run.disconnect(String(connection));
  }

  /** A user message over the first open connection; a per-turn stall timeout Think cannot take is refused. */
  userMessage(text, options = {}) {
    if (options.stall_timeout_ms != null) throw new Error("a per-turn stall timeout reaches Think only through beforeTurn, which this app does not take from a client");
    this.anyClient().userMessage(text);
  }

  toolResult(result, autoContinue) {
    this.anyClient().toolResult(result.call_id, result.outcome, autoContinue);
  }

  approval(callId, approved, autoContinue) {
    this.anyClient().approval(callId, approved, autoContinue);
  }

  resumeRequest(connection) {
    this.run.clients.get(String(connection))?.resumeRequest();
  }

  resumeAck(connection, requestId) {
    this.run.clients.get(String(connection))?.resumeAck(requestId);
  }

  /** SIGKILL and a restart on the same state directory; the clients' sockets die with the process. */
  evict() {
    return this.run.evict();
  }

  store() {
    return this.run.store();
  }

  stop() {
    return this.run.stop();
  }

  anyClient() {
    const client = this.run.clients.values().next().value;
    if (!client) throw new Error("no client connection is open to send it over");
    return client;
  }
}
