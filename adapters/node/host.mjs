// The protocol loop: reads one input, hands it to the engine, lets the
// engine's work settle, and answers `idle` with its earliest timer.
//
// Settling means: turn the real event loop (with the original
// `setImmediate`, so every microtask queued so far runs first) until the
// engine has no immediate of its own queued and no virtual timer is due
// now. Requests (`commit`, `model_request`, `fault_point`, `post`,
// `exhausted`) write their line and read the reply at once with a blocking
// read: the harness sends nothing else in between, and nothing else is
// written in between. Model calls and posts are named from `init`'s
// `next_call` and `next_post` when it gives them (no reply to wait for),
// and the inputs of one instant come in one `inputs` line, each settled
// and answered `idle` in turn, all of it written at once.
// A process may serve several runs (`reinit`), and several generations of a
// run (`generations`: an eviction starts the next one in place); a run or a
// generation ends when the next `init` arrives, and nothing the old one
// does after that is written.

import { clock, random, macrotaskTurn, pendingImmediates } from "./sandbox.mjs";
import { freshInstance, forgetGlobals, rememberGlobals } from "./generations.mjs";
import { Wire } from "./wire.mjs";
import { generationSeed } from "./random.mjs";
import { Store } from "./store.mjs";
import { ModelProxy } from "./model.mjs";

export const PROTOCOL_VERSION = 7;

/**
 * @typedef {object} Engine What an engine module gives `runEngine`: every
 *   handler is optional and may return a promise.
 * @property {() => unknown} [boot] the process started: recover what a dead predecessor left
 * @property {(connection: Connection) => unknown} [connect]
 * @property {(connectionId: number) => unknown} [disconnect]
 * @property {(connection: Connection) => unknown} [resumeRequest] the client asks to resume the stream:
 *   answer `{StreamResuming: {request_id}}` (then send it nothing until its ack) or `"ResumeNone"`
 * @property {(connection: Connection, requestId: string) => unknown} [resumeAck] the client is ready for the offered turn
 * @property {(text: string, options: object) => unknown} [userMessage]
 * @property {(chat: Chat, text: string, options: object) => unknown} [chat] `chat.key` names the call:
 *   the same key again is the same call delivered twice
 * @property {(delivery: string, text: string) => unknown} [deliver]
 * @property {(result: {call_id: string, outcome: object}, autoContinue: boolean) => unknown} [toolResult]
 * @property {(callId: string, approved: boolean, autoContinue: boolean) => unknown} [approval]
 */

/** A client connection: frames to it are `send` effects. */
export class Connection {
  constructor(host, id) {
    this.host = host;
    this.id = id;
    /** Open from its `connect` to its `disconnect`; frames sent after that are dropped. */
    this.open = true;
    /** Held for a resume ack: `broadcast` passes it by (its engine sets and clears this). */
    this.held = false;
  }
  /** Sends one frame (`Frame` JSON); resolves to whether the connection was still open. */
  async send(frame) {
    if (this.open) this.host.effect({ type: "send", connection: this.id, frame });
    return this.open;
  }
}

/** The callback of one `chat()` call. */
export class Chat {
  constructor(host, id, key) {
    this.host = host;
    this.id = id;
    /** The call's name as its caller chose it: a call delivered twice has one key. */
    this.key = key;
  }
  _call(call) {
    this.host.effect({ type: "callback", chat: this.id, call });
  }
  onStart(requestId) {
    this._call({ on_start: { request_id: requestId } });
  }
  onEvent(chunk) {
    this._call({ on_event: { chunk } });
  }
  onReset(text) {
    this._call({ on_reset: { text } });
  }
  onDone() {
    this._call("on_done");
  }
  onError(message) {
    this._call({ on_error: { message } });
  }
  onInterrupted() {
    this._call("on_interrupted");
  }
  /** The `chat()` call returned: nothing more comes for it. */
  returned() {
    this._call("returned");
  }
}

/** Everything on the harness's side of the pipe, as an engine sees it. */
export class Host {
  constructor(wire, init) {
    this.wire = wire;
    this.seed = init.seed;
    this.generation = init.generation;
    this.config = init.config;
    /** Whether the store may refuse a commit in this run (else commits wait for no reply). */
    this.storeMayRefuse = init.store_may_refuse ?? true;
    /** The fault sites switched on for this run; no other fires (null: ask about every one). */
    this.faultSites = init.fault_sites ? new Set(init.fault_sites) : null;
    this.store = new Store(this, init.state);
    this.model = new ModelProxy(this, init.next_call ?? null);
    /** @type {Map<number, Connection>} open connections by id */
    this.connections = new Map();
    this._serverTools = new Map();
    /** Posts the surface has not answered yet, by number. */
    this._posts = new Map();
    /** The number the next post gets, when `init` gave it (else each post asks). */
    this._nextPost = init.next_post ?? null;
  }

  /** Simulated milliseconds since the run began. */
  nowMs() {
    return clock.monotonicMs();
  }

  /** Writes a request and returns the reply's value. */
  request(message) {
    if (this.retired) throw new RunOver();
    this.wire.write(message);
    this.wire.flush();
    const reply = readMessage(this.wire);
    if (reply === null) exitWith("stdin closed while a request waited for its reply");
    if (reply.type !== "reply") exitWith(`expected the reply to ${message.type}, got ${reply.type}`);
    return reply.value;
  }

  /** Writes a request that names its own number: no reply comes. */
  named(message) {
    if (this.retired) throw new RunOver();
    this.wire.write(message);
  }

  /** Writes an effect (nothing once the run is over: the harness has moved on). */
  effect(message) {
    if (!this.retired) this.wire.write(message);
  }

  /** Sends a frame to every open connection, in connection order. */
  async broadcast(frame) {
    for (const connection of [...this.connections.values()]) if (!connection.held) await connection.send(frame);
  }

  /** Runs a server tool on the harness; resolves to its outcome (`ToolOutcome` JSON, or null if it died). */
  runServerTool(requestId, call) {
    return new Promise((resolve) => {
      this._serverTools.set(`${requestId}\u0000${call.call_id}`, resolve);
      this.effect({ type: "server_tool", request_id: requestId, call });
    });
  }

  /** Whether to take the unlucky path at a fault site (one switched off never fires: nothing to ask). */
  async faultPoint(site) {
    if (this.faultSites && !this.faultSites.has(site)) return false;
    return this.request({ type: "fault_point", site }).fire;
  }

  /**
   * Posts `text` to the chat surface for `delivery`. Resolves when the
   * surface answers (`post_done`, which may come much later: other inputs
   * are handled meanwhile); rejects with `PostRefused` when the surface
   * refused it (nothing was shown).
   */
  post(delivery, text) {
    let post;
    if (this._nextPost === null) ({ post } = this.request({ type: "post", delivery, text }));
    else {
      post = this._nextPost++;
      this.named({ type: "post", delivery, text, post });
    }
    return new Promise((resolve, reject) => this._posts.set(post, { resolve, reject }));
  }

  /** Calls the host's `onExhausted` hook; throws `HookFailed` when the hook threw. */
  exhausted(context) {
    const reply = this.request({ type: "exhausted", context });
    if (!reply.ok) throw new HookFailed(reply.error ?? "");
  }

  /** An annotation for the timeline (an `EngineEvent`). */
  observe(event) {
    this.effect({ type: "observe", event });
  }

  log(...args) {
    console.error(...args);
  }

  _postDone(message) {
    const pending = this._posts.get(message.post);
    if (!pending) return;
    this._posts.delete(message.post);
    if (message.ok) pending.resolve();
    else pending.reject(new PostRefused(message.error ?? ""));
  }

  _serverToolDone(message) {
    const key = `${message.request_id}\u0000${message.call_id}`;
    const resolve = this._serverTools.get(key);
    if (!resolve) return;
    this._serverTools.delete(key);
    resolve(message.outcome ?? null);
  }
}

/**
 * Fresh instances of the engine's modules one process evaluates before it
 * retires: each stays in Node's module cache (modules are never unloaded),
 * so a process makes this many and then offers neither `generations` nor
 * `reinit`, and the harness starts another.
 */
export const MAX_GENERATIONS = 400;

/**
 * Runs an engine on stdin/stdout until stdin closes. `makeEngine(host)` is
 * called at `init` and returns the engine's handlers.
 *
 * With `module` (the calling module's `import.meta.url`), the `init` of a
 * run's next generation (after an eviction) evaluates that module afresh,
 * with every module of the engine's own files it imports (packages under
 * `node_modules`, Node's built-ins and this SDK are shared: loaded once per
 * process), and takes the `makeEngine` its fresh instance passes to
 * `runEngine`. Nothing of the engine's memory crosses into the next
 * generation (its module state, its closures, the globals it set, its
 * timers), so the process declares `generations` (the harness starts the
 * generation after an eviction in place, instead of in a new process) and
 * `reinit` (a new run calls `makeEngine` again, as below).
 *
 * With `module` and `moduleState: false`, the engine vouches that its own
 * modules hold no state (constants, functions and classes only: all of its
 * memory lives in what `makeEngine` builds, as `reinit` already requires):
 * the next generation calls `makeEngine` again on the instance the process
 * has, after the same reset (globals put back, timers dropped, generator
 * reseeded, old host retired). Evaluating a fresh instance is most of what
 * an eviction costs in place (the module hooks' thread, compiling, and the
 * engine's code running cold again).
 *
 * With `reinit` alone, the process offers to be reused across runs: the
 * next run's `init` calls `makeEngine` again (new host, clock at zero,
 * generator reseeded, timers dropped), so every piece of an engine's state
 * must live in what `makeEngine` builds; module state would leak.
 *
 * With `capabilities` (names from the protocol's vocabulary, docs/protocol.md),
 * the engine declares what it implements at every `init`; the harness does not
 * run a scenario that needs anything else, and reports it as not applicable.
 * Without it the engine declares nothing and is held to every scenario.
 * @param {(host: Host) => Engine | Promise<Engine>} makeEngine
 * @param {{reinit?: boolean, module?: string, moduleState?: boolean, capabilities?: string[]}} [options]
 */
export async function runEngine(makeEngine, { reinit = false, module, moduleState = true, capabilities } = {}) {
  if (loading) {
    // A fresh instance of the engine's module, evaluated for a generation:
    // it hands over its factory; the loop that loaded it runs it.
    loading.makeEngine = makeEngine;
    return;
  }
  if (capabilities !== undefined && !(Array.isArray(capabilities) && capabilities.every((name) => typeof name === "string"))) {
    exitWith("runEngine: `capabilities` is a list of capability names");
  }
  process.on("unhandledRejection", crash);
  const wire = new Wire();
  // What the engine said before it exited reaches the harness (then its exit).
  process.on("exit", () => wire.flush());
  let message = readMessage(wire);
  let inits = 0;
  let instances = 1;
  while (message !== null) {
    if (message.type !== "init") exitWith(`the first message of a run must be init, got ${message.type}`);
    inits += 1;
    if (module && inits === 1) rememberGlobals();
    // A later generation of a run, in the process that served the one
    // before: a fresh instance of the engine's modules, or, when they keep
    // no state, only the globals put back. (A new run calls `makeEngine`
    // again on the instance it has, as `reinit` does.)
    if (module && inits > 1 && message.generation > 1) {
      if (moduleState) {
        instances += 1;
        makeEngine = await loadGeneration(module, instances);
      } else forgetGlobals();
    }
    const fresh = module !== undefined && instances < MAX_GENERATIONS;
    const offers = { reinit: fresh || (reinit && !module), generations: fresh, batches: true, capabilities };
    message = await oneRun(wire, message, makeEngine, offers);
  }
}

/** Set while a fresh instance of the engine's module evaluates. */
let loading = null;

/** The `makeEngine` of a fresh instance of `module`, evaluated as a new process would evaluate it. */
async function loadGeneration(module, generation) {
  // A new process evaluates its modules before any `init`: on seed 0, at
  // time zero, with the globals as the SDK left them.
  clock.reset(0);
  random.reseed(0n);
  forgetGlobals();
  loading = { makeEngine: null };
  try {
    await freshInstance(module, generation);
  } catch (error) {
    loading = null;
    crash(error);
  }
  const { makeEngine } = loading;
  loading = null;
  if (typeof makeEngine !== "function") exitWith(`a fresh instance of ${module} did not call runEngine`);
  return makeEngine;
}

/** One run or generation: boot, then inputs until stdin closes (null) or the next `init`. */
async function oneRun(wire, init, makeEngine, offers) {
  if (init.protocol !== PROTOCOL_VERSION) exitWith(`protocol ${init.protocol} is not spoken here (version ${PROTOCOL_VERSION})`);
  clock.reset(init.wall_base_ms);
  random.reseed(generationSeed(init.seed, init.generation));
  clock.advanceTo(init.now_ns);
  const host = new Host(wire, init);
  const engine = await makeEngine(host);
  await settle(host, () => engine.boot?.(), offers);
  host.wire.flush();
  for (;;) {
    const message = readMessage(wire);
    if (message === null || message.type === "init") {
      host.retired = true;
      return message;
    }
    // The inputs of one instant, each as if it came alone; one write for all.
    const inputs = message.type === "inputs" ? message.inputs : [message];
    if (!Array.isArray(inputs) || inputs.length === 0) exitWith("inputs without any input: a batch holds one or more");
    for (const input of inputs) {
      if (input.type === "inputs" || input.type === "init") exitWith(`${input.type} inside inputs`);
      clock.advanceTo(input.now_ns);
      await settle(host, () => dispatch(host, engine, input));
    }
    host.wire.flush();
  }
}

/** Work of a finished run that tries to reach the harness. */
class RunOver extends Error {}

/** The chat surface refused a post. */
export class PostRefused extends Error {}

/** The host's hook threw. */
export class HookFailed extends Error {}

function dispatch(host, engine, message) {
  switch (message.type) {
    case "connect": {
      const connection = new Connection(host, message.connection);
      host.connections.set(connection.id, connection);
      return engine.connect?.(connection);
    }
    case "disconnect": {
      const connection = host.connections.get(message.connection);
      if (connection) connection.open = false;
      host.connections.delete(message.connection);
      return engine.disconnect?.(message.connection);
    }
    case "resume_request": {
      const connection = host.connections.get(message.connection);
      return connection && engine.resumeRequest?.(connection);
    }
    case "resume_ack": {
      const connection = host.connections.get(message.connection);
      return connection && engine.resumeAck?.(connection, message.request_id);
    }
    case "user_message":
      return engine.userMessage?.(message.text, message.options);
    case "chat":
      return engine.chat?.(new Chat(host, message.chat, message.key), message.text, message.options);
    case "deliver":
      return engine.deliver?.(message.delivery, message.text);
    case "tool_result":
      return engine.toolResult?.(message.result, message.auto_continue);
    case "approval":
      return engine.approval?.(message.call_id, message.approved, message.auto_continue);
    case "model_chunk":
      return host.model.chunk(message.call, message.chunk);
    case "model_end":
      return host.model.end(message.call, message.end);
    case "server_tool_done":
      return host._serverToolDone(message);
    case "post_done":
      return host._postDone(message);
    case "timer":
      return undefined; // the settle loop runs whatever is due
    case "reply":
      return exitWith("a reply with no request waiting");
    default:
      return exitWith(`a message the protocol does not have: ${message.type}`);
  }
}

/** Handles one input and everything it sets off, then reports idle (written at the next flush). */
async function settle(host, handle, offers = null) {
  const handled = handle();
  // A handler's own promise is the engine's business; a rejection is a crash.
  Promise.resolve(handled).catch(crash);
  for (;;) {
    await macrotaskTurn();
    if (pendingImmediates() > 0) continue;
    if (clock.runNextDue()) continue;
    break;
  }
  const idle = { type: "idle", next_timer_ns: clock.nextDueNs() };
  if (offers?.reinit) idle.reinit = true;
  if (offers?.generations) idle.generations = true;
  if (offers?.batches) idle.batches = true;
  if (offers?.capabilities) idle.capabilities = offers.capabilities;
  host.effect(idle);
}

/** The next message from the harness, or null once stdin closed. */
function readMessage(wire) {
  const line = wire.readLine();
  if (line === null) return null;
  let message;
  try {
    message = JSON.parse(line);
  } catch (error) {
    exitWith(`not JSON: ${line.slice(0, 200)} (${error.message})`);
  }
  if (message.type === "init") message.seed = exactSeed(line, message.seed);
  return message;
}

/** The seed as a BigInt read from the raw text: a u64 does not fit a double. */
function exactSeed(line, parsed) {
  const match = /"seed"\s*:\s*(\d+)/.exec(line);
  return match ? BigInt(match[1]) : BigInt(parsed ?? 0);
}

function crash(error) {
  if (error instanceof RunOver) return;
  console.error("engine failed:", error);
  process.exit(1);
}

function exitWith(message) {
  console.error(`protocol: ${message}`);
  process.exit(2);
}
