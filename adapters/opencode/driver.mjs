// The opencode driver of the live bridge (`adapters/live/`): opencode's
// server (`opencode serve`, the pinned binary) started on the run's
// scratch directory, driven over its HTTP API and event stream as its own
// clients drive it.
//
// - A user message is `POST /session/:id/prompt_async` on the run's one
//   session (made by the first generation, named in the scratch directory
//   for the next); a connection is an event stream of its own
//   (`connection.mjs`).
// - The store is the session's messages (`GET /session/:id/message`), in
//   the history's vocabulary (`transcript.mjs`).
// - Messages and requests go by the built-in engine's names (`names.mjs`):
//   the first user message is `m2` and its turn `r1`, its reply `m3`.
// - At rest: the session is idle, no prompt is on its way, no read of the
//   session is under way, and nothing of the session happened for a quiet
//   window (`TURNSIM_OPENCODE_QUIET_MS`, 250 ms): opencode writes a turn's
//   summary just after it goes idle.
//
// What it cannot take is declared, so a scenario that needs it is not
// applicable (see `capabilities` and `lacks` below, and the README).

import { readFileSync, writeFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { EventStream, httpJson } from "../live/event-stream.mjs";
import { freePort, waitUntilReady } from "../live/processes.mjs";
import { requestMessages } from "../live/openai.mjs";
import { Connection } from "./connection.mjs";
import { ChatCall } from "./chat-call.mjs";
import { Names } from "./names.mjs";
import { protocolTranscript, outputText } from "./transcript.mjs";
import { layout, opencodeBinary, opencodeConfig, writeTools } from "./workspace.mjs";

const QUIET_MS = Number(process.env.TURNSIM_OPENCODE_QUIET_MS) || 250;
/** How long a connection's stream may trail the driver's own before the store is synced anyway, in ms. */
const STREAMS_LAG_MS = 500;

export class OpencodeDriver {
  constructor(bridge) {
    this.bridge = bridge;
    /**
     * Beyond the core: none (opencode has no recovery of a dead turn, no
     * messenger; see the README). `TURNSIM_OPENCODE_CLAIM` (comma-separated)
     * claims more, to hold opencode to a behaviour it does not claim: the
     * story of a fix it does not have yet (`provider-retries`, PR #26167).
     */
    this.capabilities = (process.env.TURNSIM_OPENCODE_CLAIM ?? "").split(",").map((name) => name.trim()).filter(Boolean);
    /**
     * Of the core: no tool a client answers (opencode's tools run in the
     * server), no approvals yet, no `chat()` RPC, no store seeded or refused
     * by the harness (opencode's store is its own), no stream-resume handshake.
     */
    this.lacks = ["client-tools", "approvals", "stored-transcript", "store-faults", "stream-resume"];
    /** `chat()` calls under way, by chat number. */
    this.chats = new Map();
    /** Who waits for opencode to store the user message they sent, in order: `{text, call}` (`call` null for a client). */
    this.awaitingUser = [];
    this.connections = new Map();
    /** opencode's messages by the names the history gives them (`names.mjs`). */
    this.names = new Names(join(bridge.scratchDir, "names.json"));
    /** User messages opencode stored (by its event stream), and those whose text it stored. */
    this.userMessages = new Set();
    this.usersStored = new Set();
    this.status = "idle";
    this.promptsOnTheirWay = 0;
    this.readsUnderWay = 0;
    this.lastEventMs = 0;
    /** Server-tool outputs as the harness returned them, by call id (opencode stores their text). */
    this.outputs = new Map();
    for (const message of bridge.state?.messages ?? []) {
      for (const part of message.parts) if (part.type === "tool" && part.output !== null && part.output !== undefined) this.outputs.set(part.call_id, part.output);
    }
  }

  async start() {
    const { home, project } = layout(this.bridge.scratchDir);
    writeTools(project, this.bridge.config.tools, this.bridge.toolUrl);
    this.port = await freePort();
    this.base = `http://127.0.0.1:${this.port}`;
    const env = serverEnvironment(home, opencodeConfig(this.bridge.config, this.bridge.providerUrl));
    this.process = this.bridge.spawn(opencodeBinary(), ["serve", "--port", String(this.port), "--hostname", "127.0.0.1", "--pure", "--print-logs", "--log-level", "INFO"], { env, cwd: project, name: "opencode" });
    await waitUntilReady(async () => (await httpJson(this.base, "GET", "/global/health", undefined, { timeoutMs: 500 })).status === 200, { what: "opencode serve", process: this.process, totalMs: 60_000 });
    await waitUntilReady(async () => (await httpJson(this.base, "GET", "/session", undefined, { timeoutMs: 20_000 })).status === 200, { what: "opencode's sessions", process: this.process, tryMs: 20_000 });
    this.sessionId = await this.session();
    // A server's first prompt loads its tools and plugins (seconds): done
    // here, before the run's time starts, by listing the tools.
    await httpJson(this.base, "GET", "/experimental/tool/ids", undefined, { timeoutMs: 60_000 });
    this.events = new EventStream(`${this.base}/event`, { onEvent: (event) => this.watch(event), onClose: () => this.bridge.note("opencode's event stream closed") });
    await this.events.opened;
    for (const { info } of (await this.readTranscript()).raw) if (info.role === "user") this.usersStored.add(info.id);
    const statuses = (await httpJson(this.base, "GET", "/session/status")).body ?? {};
    this.status = statuses[this.sessionId]?.type ?? "idle";
  }

  /** The run's session: made by the first generation, found by the later ones. */
  async session() {
    const file = join(this.bridge.scratchDir, "session.json");
    if (existsSync(file)) return JSON.parse(readFileSync(file, "utf8")).id;
    const made = await httpJson(this.base, "POST", "/session", {});
    if (made.status !== 200 || !made.body?.id) throw new Error(`POST /session: ${made.status} ${JSON.stringify(made.body)}`);
    writeFileSync(file, JSON.stringify({ id: made.body.id }));
    return made.body.id;
  }

  /** The driver's own event stream: whether opencode is busy, and when its store changed. */
  watch(event) {
    if (typeof event.id === "string") this.lastEventId = event.id;
    const properties = event.properties ?? {};
    if (!this.ours(properties)) return;
    this.lastEventMs = performance.now();
    if (event.type === "session.status") {
      this.status = properties.status?.type ?? this.status;
    }
    if (event.type === "session.idle") this.status = "idle";
    if (event.type === "message.part.updated" && properties.part?.type === "text" && this.userMessages.has(properties.part.messageID)) {
      this.userStored(properties.part.messageID, properties.part.text ?? "");
    }
    if (event.type === "message.updated" && properties.info?.role === "user") this.userMessages.add(properties.info.id);
    for (const call of this.chats.values()) call.enqueue(event);
    if (event.type !== "message.part.delta" && event.type.startsWith("message.")) this.bridge.storeChanged();
    if (event.type === "session.status" && this.status === "idle") this.bridge.storeChanged();
    if (event.type === "session.status" && this.status === "retry") this.bridge.note(`opencode retries: ${JSON.stringify(properties.status)}`);
  }

  /** Whether an event's properties belong to the run's session. */
  ours(properties) {
    const session = properties.sessionID ?? properties.info?.sessionID ?? properties.part?.sessionID;
    return session === this.sessionId;
  }

  busy() {
    if (this.status !== "idle" || this.promptsOnTheirWay > 0 || this.readsUnderWay > 0) return true;
    if ([...this.connections.values(), ...this.chats.values()].some((view) => view.busy())) return true;
    if ([...this.chats.values()].some((call) => !call.returned)) return true;
    return performance.now() - this.lastEventMs < QUIET_MS;
  }

  /** Waits until every connection has been delivered and has shown every event the driver's own stream has. */
  async framesSettled() {
    const views = [...this.connections.values(), ...this.chats.values()];
    await Promise.all(views.map((view) => (view instanceof Connection ? view.reached(this.lastEventId, STREAMS_LAG_MS) : view.caughtUp())));
  }

  /** The session's messages: `{raw, messages}` (opencode's, and the protocol's). */
  async readTranscript() {
    this.readsUnderWay += 1;
    try {
      const answer = await httpJson(this.base, "GET", `/session/${this.sessionId}/message`);
      if (answer.status !== 200) throw new Error(`GET messages: ${answer.status} ${JSON.stringify(answer.body).slice(0, 200)}`);
      const raw = answer.body ?? [];
      return { raw, messages: protocolTranscript(raw, { outputs: (callId, text) => this.output(callId, text), names: this.names }) };
    } finally {
      this.readsUnderWay -= 1;
    }
  }

  async snapshot() {
    return (await this.readTranscript()).messages;
  }

  /** A completed tool's output: the value the harness returned when opencode stored its text. */
  output(callId, text) {
    if (!this.outputs.has(callId)) return text;
    const value = this.outputs.get(callId);
    return outputText(value) === text ? value : text;
  }

  /**
   * opencode stored a user message's text: the client or `chat()` call
   * that sent that text (the first one waiting, if several sent the same)
   * is answered by its request.
   */
  userStored(userId, text) {
    if (this.usersStored.has(userId)) return;
    this.usersStored.add(userId);
    this.promptsOnTheirWay = Math.max(0, this.promptsOnTheirWay - 1);
    let at = this.awaitingUser.findIndex((waiting) => waiting.text === text);
    if (at < 0) at = 0;
    const [waiting] = this.awaitingUser.splice(at, 1);
    waiting?.call?.started(this.requestOfUser(userId));
  }

  /** The request of the user message opencode calls `userId`. */
  requestOfUser(userId) {
    return userId ? this.names.user(userId).request : null;
  }

  /** The name of the reply whose first assistant message opencode calls `assistantId`. */
  replyName(assistantId) {
    return this.names.reply(assistantId);
  }

  lastRequest() {
    return this.names.lastRequest();
  }

  /** Only the turn's own requests are the scenario's: they offer tools (the title generator, off anyway, and summaries offer none). */
  classify(body) {
    if (Array.isArray(body.tools) && body.tools.length > 0) return null;
    return { answer: "Noted.", why: "a request that offers no tools (not the turn's)" };
  }

  describeRequest(body, stored) {
    const messages = requestMessages(body, stored);
    const lastUser = [...messages].reverse().find((message) => message.role === "user");
    const reply = messages[messages.length - 1];
    const steps = reply?.role === "assistant" ? reply.parts.filter((part) => part.type === "step-start").length : 1;
    return { request_id: (lastUser && this.names.requestOfMessage(lastUser.id)) ?? this.lastRequest() ?? "r0", step: steps, continuation: false, messages };
  }

  requestIdOfTool() {
    return this.lastRequest() ?? "r0";
  }

  toolFinished(callId, outcome) {
    if (outcome && "Output" in outcome) this.outputs.set(callId, outcome.Output);
  }

  async connect(id) {
    const connection = new Connection(id, this);
    this.connections.set(id, connection);
    await connection.connect();
  }

  disconnect(id) {
    this.connections.get(id)?.close();
    this.connections.delete(id);
  }

  /** A `chat()` call: made now, answered when opencode's call returns (`chat-call.mjs`). */
  chat(message) {
    const call = new ChatCall(message, this);
    this.chats.set(message.chat, call);
    this.awaitingUser.push({ text: message.text, call });
    this.promptsOnTheirWay += 1;
    call.call().finally(() => this.chats.delete(message.chat));
    return true;
  }

  async userMessage(text) {
    const waiting = { text, call: null };
    this.awaitingUser.push(waiting);
    this.promptsOnTheirWay += 1;
    const answer = await httpJson(this.base, "POST", `/session/${this.sessionId}/prompt_async`, { parts: [{ type: "text", text }] });
    if (answer.status >= 300) {
      this.promptsOnTheirWay -= 1;
      this.awaitingUser.splice(this.awaitingUser.indexOf(waiting), 1);
      this.bridge.note(`prompt_async: ${answer.status} ${JSON.stringify(answer.body).slice(0, 200)}`);
    }
  }

  stop() {
    this.events?.close();
    for (const connection of this.connections.values()) connection.close();
  }
}

/** opencode's environment: its home is the run's, nothing reaches the network, nothing of the machine's user is read. */
function serverEnvironment(home, config) {
  const env = {};
  for (const [name, value] of Object.entries(process.env)) if (!name.startsWith("XDG_") && !name.startsWith("OPENCODE")) env[name] = value;
  return {
    ...env,
    HOME: home,
    OPENCODE_CONFIG_CONTENT: JSON.stringify(config),
    OPENCODE_DISABLE_MODELS_FETCH: "1",
    OPENCODE_DISABLE_AUTOUPDATE: "1",
    OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
    OPENCODE_DISABLE_DEFAULT_PLUGINS: "1",
    OPENCODE_DISABLE_CLAUDE_CODE: "1",
  };
}
