// Think as an engine of the live bridge (adapters/live/, its README has
// the driver interface): workerd with the app started on the run's scratch
// directory, driven over Think's WebSocket chat protocol as useAgentChat
// drives it, its store read from the Durable Object's SQLite file.
//
// - One Durable Object instance is the run's conversation; each harness
//   connection is a WebSocket of its own (client.mjs translates frames).
// - The store is what Think persisted (store.mjs), synced when a frame
//   says Think wrote (a transcript, a message update, a turn's end), and
//   with no connection open (no frame says it), every quiet window.
// - A model request belongs to the request whose stream is under way on
//   the clients (Think's own id: the client's for a user message, a fresh
//   one for a continuation or a recovery, learnt from the resume offer
//   Think sends as it starts one), else to the last one a client sent;
//   `continuation` is true for every request Think starts itself. A
//   recovery's continue shows the model Think's continue prompt as a last
//   user message that Think never stores: the request is reported without
//   it, as the continuation of the reply before it.
// - A tool continuation's answer is a new assistant message (Think's
//   `continueLastTurn`: "The new response is persisted as a separate
//   assistant message", dist/think.js 7417-7422) whose id Think sends
//   nowhere (its `start` carries none, 8007-8008) until it stores it under
//   a fresh UUID. The driver names it `<request>-reply` from the request
//   on (the request's messages, the clients' chunks), and once Think's
//   store or transcript shows the message after the leaf it continued,
//   Think's id is shown as that name everywhere (`aliases`).
// - Every request and message is shown to the harness under the built-in
//   engine's names (`r1`, `m2`, `m3`: names.mjs), so a scenario's
//   expectations name the same ones; internally the driver keeps Think's.
// - Busy while a request streams, a recovery is under way (Think's
//   `cf_agent_chat_recovering`, or a stored incident still live), a stored
//   stream is left `streaming` (a restarted object wakes on its keep-alive
//   alarm to recover it), or Think sent anything, or was sent anything, in
//   the last quiet window (`TURNSIM_THINK_QUIET_MS`, 500 ms: a tool result
//   starts its continuation after Think's 50 ms coalesce window, and Think
//   answers the sender of a result with no frame at all).
//
// Declared (docs/protocol.md's vocabulary): `recovery`, `coalesce`
// (Think's `COALESCE_MS = 50`), `dangling-call-repair` (agents'
// `repairInterruptedToolParts`). Lacked: `chat` (Think's `chat()` is an RPC
// into the Durable Object; nothing outside reaches it), `store-faults`
// (workerd's SQLite cannot be made to refuse a write), `stored-transcript`
// (a store the harness seeds is not one Think reads), `recovery-records`
// (agents keeps its incidents as `cf:chat-recovery:incident:*` rows in its
// own KV, with its own lifecycle; the bridge mirrors the transcript only,
// so what `expect.recovery` counts is not shown), `dynamic-tools` (agents
// builds every client tool with `tool()`, and the app lists its server
// tools up front), `engine-settings` (Think fixes its coalesce window,
// recovery debounces and recovery itself: settings.mjs). `messenger` and
// `provider-retries` are not declared. A scenario that needs what Think
// lacks is reported not applicable by the harness; a setting it cannot
// take that slips past those (settings.mjs's `unsupported`) is noted on
// stderr at start.
import { bundle } from "./bundle.mjs";
import { ThinkClient } from "./client.mjs";
import { thinkSettings, clientToolSchemas, unsupported } from "./settings.mjs";
import { Names } from "./names.mjs";
import { readStore } from "./store.mjs";
import { AGENT_PATH, WORKERD, writeConfig } from "./workerd.mjs";
import { freePort, requestMessages, waitUntilReady } from "../live/index.mjs";
import path from "node:path";

const QUIET_MS = Number(process.env.TURNSIM_THINK_QUIET_MS) || 500;
const LIVE_INCIDENT = new Set(["attempting", "scheduled", "running"]);
/** How long a connection waits for Think's transcript before the harness goes on. */
const CONNECT_MS = 10_000;
/** Think's recovery prompt (dist/think.js 1266), shown to the model and never stored. */
const CONTINUE_PROMPT = "Continue your previous response from exactly where it left off. Do not repeat any of it.";
/** How long a store sync waits for Think to name a client request's reply (its UI stream's `start`). */
const NAMING_MS = 300;

export class ThinkDriver {
  constructor(bridge) {
    this.bridge = bridge;
    this.capabilities = ["recovery", "coalesce", "dangling-call-repair"];
    this.lacks = ["chat", "store-faults", "stored-transcript", "recovery-records", "dynamic-tools", "engine-settings"];
    this.clients = new Map();
    /** Requests by Think's id: `{streaming, continuation}`; the last one a client sent or Think started. */
    this.requests = new Map();
    this.lastRequest = null;
    this.recovering = false;
    this.lastActivityMs = 0;
    this.lastPollMs = 0;
    this.stored = { messages: [], records: {}, streaming: false };
    /** User messages sent and not yet shown to their sender: `{connection, messageId}`. */
    this.echo = [];
    /** Think's id of a stored tool continuation's reply -> the name the harness knew it by. */
    this.aliases = new Map();
    /** The names shown to the harness, the built-in engine's (names.mjs). */
    this.names = new Names(bridge.scratchDir ? path.join(bridge.scratchDir, "think-names.json") : null);
    /** The store as last shown, under the driver's own ids (before `names`). */
    this.shownStore = [];
  }

  async start() {
    for (const reason of unsupported(this.bridge.config)) this.bridge.note(`Think cannot take ${reason}; it runs with its own`);
    const bundleDir = await bundle({ log: (line) => this.bridge.note(line) });
    this.port = await freePort();
    const provider = new URL(this.bridge.providerUrl).host;
    const configFile = writeConfig(this.bridge.scratchDir, {
      bundleDir,
      port: this.port,
      providerAddress: provider,
      toolsAddress: new URL(this.bridge.toolUrl).host,
      settings: thinkSettings(this.bridge.config)
    });
    this.process = this.bridge.spawn(WORKERD, ["serve", configFile], { cwd: this.bridge.scratchDir, name: "workerd" });
    await waitUntilReady(async () => (await fetch(`http://127.0.0.1:${this.port}/health`)).ok, { what: "workerd", process: this.process, totalMs: 30_000 });
    // A fresh object's first wake creates Think's tables (1-2 s here): done
    // before the run's first input rather than inside it. Only in the first
    // generation: a restarted object must wake when the run wakes it.
    if (this.bridge.generation === 1) await fetch(`http://127.0.0.1:${this.port}${AGENT_PATH}/conversation`).catch(() => {});
    this.readStore();
  }

  readStore() {
    this.stored = readStore(path.join(this.bridge.scratchDir, "do"));
    return this.stored;
  }

  snapshot() {
    this.shownStore = this.named(this.readStore().messages);
    const messages = this.names.messages(this.shownStore);
    this.echoStoredUserMessages(messages);
    return messages;
  }

  /**
   * `messages` (Think's, in the active branch's order) with each tool
   * continuation's reply under its name: the assistant message right after
   * the leaf the continuation continued is its reply.
   */
  named(messages) {
    for (const request of this.requests.values()) {
      if (!request.replyId || request.replyBound) continue;
      const reply = replyAfter(messages, request.leafId);
      if (!reply || this.aliases.has(reply.id)) continue;
      this.aliases.set(reply.id, request.replyId);
      this.names.bind(reply.id, request.replyId);
      request.replyBound = true;
    }
    return messages.map((message) => (this.aliases.has(message.id) ? { ...message, id: this.aliases.get(message.id) } : message));
  }

  /** The message a continuation's chunks go into: a tool continuation's own reply, else null (the leaf). */
  replyOf(requestId) {
    return this.requests.get(requestId)?.replyId ?? null;
  }

  busy() {
    // Think tells only a connection that it wrote: with none open, the
    // store is read once per quiet window while anything is under way.
    if (this.clients.size === 0 && performance.now() - this.lastPollMs >= QUIET_MS) {
      this.lastPollMs = performance.now();
      this.bridge.storeChanged();
    }
    if ([...this.requests.values()].some((request) => request.streaming)) return true;
    if (this.recovering || this.stored.streaming) return true;
    if (Object.values(this.stored.records).some((record) => LIVE_INCIDENT.has(record?.status))) return true;
    return performance.now() - this.lastActivityMs < QUIET_MS;
  }

  /**
   * Frames come over a WebSocket: let what is in flight land before the
   * store is read, and, while a client's request streams with its reply not
   * yet named, wait (at most `NAMING_MS`) for the UI stream's `start`,
   * which names it a few milliseconds after Think asks the model.
   */
  async framesSettled() {
    const until = performance.now() + NAMING_MS;
    do await new Promise((resolve) => setTimeout(resolve, 10));
    while (this.unnamedReply() && performance.now() < until);
  }

  unnamedReply() {
    return [...this.requests.values()].some((request) => request.streaming && !request.continuation && !request.messageId);
  }

  /**
   * The request as the model was asked it. Its reply is the message Think
   * streams into: the one the request's `start` named (Think has not stored
   * it yet when it first asks the model). A continuation's answer Think
   * stores as a message of its own, named nowhere before it is stored: its
   * request shows the leaf it continues (docs/cloudflare-think-findings.md).
   */
  describeRequest(body) {
    const stored = this.shownStore;
    // A restarted object's recovery asks the model before any client hears
    // of it: its request is the one its stored stream names.
    const id = this.streamingRequest() ?? this.stored.streamingRequest ?? this.lastRequest ?? "r0";
    // Think continues a stored partial answer and retries a turn that stored none.
    const continues = this.stored.messages.at(-1)?.role === "assistant";
    const request = this.requests.get(id) ?? (id === this.stored.streamingRequest ? this.started(id, { continuation: continues }) : undefined);
    // Think opens a recovery's incident before it asks the model: a request
    // Think started is judged on the store as it is now (read once here:
    // each read is a process).
    const ownRequest = request && !request.userMessageId && (request.continuation || id === this.stored.streamingRequest);
    if (ownRequest) this.readStore();
    const prompted = continuePrompted(body);
    const leaf = this.stored.messages.at(-1);
    // A request Think starts itself with no answer stored after the last
    // user message retries that turn (`_chatRecoveryRetry`, "a fresh user
    // turn", dist/think.js 5555-5556): it answers anew, like the client's
    // request it retries, into a message of its own.
    // (So is a restarted object's request that no connection heard of.)
    if (ownRequest && !prompted && leaf?.role === "user") {
      request.continuation = false;
      request.retry = true;
      request.userMessageId = leaf.id;
    }
    const recovery = prompted || (request?.continuation && this.recoveryUnderWay());
    if (request?.continuation && !recovery && !request.replyId && leaf?.role === "assistant") {
      request.replyId = `${id}-reply`;
      request.leafId = leaf.id;
    }
    // A client's request whose `start` no connection saw (its sender left
    // before Think asked the model): its reply is named like a tool
    // continuation's, from the request on, and bound to the assistant
    // message Think stores after the request's user message.
    // (Think may have stored the reply already: then it goes by Think's id.)
    if (request && !request.continuation && !request.messageId && request.userMessageId) {
      request.replyId = request.messageId = replyAfter(this.stored.messages, request.userMessageId)?.id ?? `${id}-reply`;
      request.leafId = request.userMessageId;
    }
    const messages = requestMessages(withoutContinuePrompt(body), stored);
    if (request?.continuation) splitReplies(messages, stored, recovery ? null : request.replyId);
    const last = messages.at(-1);
    if (request?.messageId && last?.role === "user") messages.push({ id: request.messageId, role: "assistant", parts: [{ type: "step-start" }] });
    else if (request?.messageId && last?.id.startsWith("request-reply-")) last.id = request.messageId;
    const reply = messages.at(-1);
    const step = reply?.role === "assistant" ? reply.parts.filter((part) => part.type === "step-start").length : 1;
    return { request_id: this.requestName(id), step, continuation: request?.continuation ?? false, messages: this.names.messages(messages) };
  }

  /**
   * A recovery's continuation streams into the interrupted message
   * (`continueLastTurn`, `trigger: "recovery-continue"`: "they stream into
   * the interrupted assistant message so it stays one message", dist/think.js
   * 7419-7421), with or without the continue prompt (a turn cut before its
   * tool continuation ran gets none).
   */
  recoveryUnderWay() {
    return this.recovering || Object.values(this.stored.records).some((record) => LIVE_INCIDENT.has(record?.status));
  }

  requestIdOfTool() {
    return this.requestName(this.streamingRequest() ?? this.stored.streamingRequest ?? this.lastRequest ?? "r0");
  }

  /** A request's name (`r0`: none is known yet). */
  requestName(id) {
    return id === "r0" ? id : this.names.request(id);
  }

  /**
   * The request whose stream is under way: the latest one Think has sent a
   * frame of; else the first one sent and not done, as Think runs a
   * client's requests in the order they came (a message sent while another
   * turn runs waits its turn, dist/think.js `TurnQueue`).
   */
  streamingRequest() {
    let framed = null;
    let queued = null;
    for (const [id, request] of this.requests) {
      if (!request.streaming) continue;
      if (request.framed) framed = id;
      else queued ??= id;
    }
    return framed ?? queued;
  }

  async connect(id) {
    const client = new ThinkClient({
      port: this.port,
      instance: "conversation",
      connectionId: `c${id}`,
      clientTools: clientToolSchemas(this.bridge.config),
      onFrame: (frame) => this.frame(id, frame),
      onRaw: (data) => this.watch(data),
      replyOf: (requestId) => this.replyOf(requestId),
      named: (messages) => this.named(messages),
      onLog: (line) => this.bridge.note(line)
    });
    this.clients.set(id, client);
    await client.open();
    client.loadInitialMessages();
    // A connection shows the conversation once Think sends it (a restarted
    // object wakes for the connection first: 1-2 s here); until then the
    // harness would judge a client that was never shown anything.
    await Promise.race([client.transcriptArrived, new Promise((resolve) => setTimeout(resolve, CONNECT_MS))]);
  }

  disconnect(id) {
    this.clients.get(id)?.close();
    this.clients.delete(id);
  }

  /** What Think sent, for the driver's own bookkeeping (busy, requests, the store). */
  watch(data) {
    this.lastActivityMs = performance.now();
    if (data.type === "cf_agent_chat_recovering") this.recovering = !!data.recovering;
    // Think offers a stream (a continuation, a recovery) as it starts it, before it asks the model.
    // A request Think starts itself (not a client's), offered as it starts,
    // continues the answer before it: a tool continuation, or a recovery's
    // continue. (An offer of a request already known, to a client that
    // joins, says nothing of it.)
    if (data.type === "cf_agent_stream_resuming" && data.id && !this.requests.has(data.id)) {
      this.started(data.id, { continuation: true });
      this.names.request(data.id);
    }
    if (data.type === "cf_agent_chat_messages" || data.type === "cf_agent_message_updated") this.bridge.storeChanged();
    if (data.type !== "cf_agent_use_chat_response" || !data.id) return;
    if (data.replay) return this.replayed(data);
    const request = this.started(data.id, data);
    request.framed = true;
    request.streaming = !data.done;
    const chunk = data.body && !data.done ? safeJson(data.body) : null;
    if (chunk?.type === "start" && chunk.messageId && !request.continuation) this.startNamed(request, chunk.messageId);
    if (data.done) this.bridge.storeChanged();
  }

  /**
   * A stream Think replays to a connection that resumed it names its reply
   * in its `start`: when no connection saw it live (its sender left before
   * Think asked the model), the driver named the reply already, and Think's
   * id is that name from now on.
   */
  replayed(data) {
    const request = this.requests.get(data.id);
    const chunk = data.body ? safeJson(data.body) : null;
    if (chunk?.type === "start" && chunk.messageId && request?.replyId && !request.continuation) this.startNamed(request, chunk.messageId);
  }

  /**
   * A request's `start` names its reply: Think's id is the reply's from now
   * on, or, when the driver named the reply first, shown under that name.
   */
  startNamed(request, messageId) {
    if (!request.replyId) {
      request.messageId = messageId;
      this.names.message(messageId);
      return;
    }
    if (!this.aliases.has(messageId) && messageId !== request.replyId) this.aliases.set(messageId, request.replyId);
    this.names.bind(messageId, request.replyId);
  }

  /** The request `id`, known from now on; `frame.continuation` flags a continuation of the answer before it. */
  started(id, frame) {
    let request = this.requests.get(id);
    if (!request) {
      request = { streaming: true, continuation: false, framed: true };
      this.requests.set(id, request);
      this.lastRequest = id;
    }
    request.continuation ||= !!frame.continuation && !request.retry;
    return request;
  }

  frame(connection, frame) {
    frame = this.names.frame(frame);
    if (frame.Done || frame.Error) this.bridge.sendAfterStore(connection, frame);
    else this.bridge.send(connection, frame);
  }

  anyClient() {
    this.lastActivityMs = performance.now();
    const client = this.clients.values().next().value;
    if (!client) this.bridge.note("no client connection is open to send it over");
    return client;
  }

  userMessage(text, options = {}) {
    if (options?.stall_timeout_ms != null) this.bridge.note("a per-turn stall timeout reaches Think only through beforeTurn: ignored");
    const client = this.anyClient();
    if (!client) return;
    const names = this.names.userMessage();
    const id = client.userMessage(text, { requestId: names.request, messageId: names.message });
    this.requests.set(id, { streaming: true, continuation: false, userMessageId: client.lastUserMessageId });
    this.lastRequest = id;
    this.echo.push({ connection: this.connectionOf(client), messageId: client.lastUserMessageId });
  }

  connectionOf(client) {
    for (const [connection, candidate] of this.clients) if (candidate === client) return connection;
    return null;
  }

  /**
   * useAgentChat shows the user's message at once (Think sends the sender no
   * transcript until the turn ends): once the store holds it, the sender is
   * sent the stored transcript, as the client then shows it.
   */
  echoStoredUserMessages(messages) {
    this.echo = this.echo.filter(({ connection, messageId }) => {
      if (!messages.some((message) => message.id === messageId)) return true;
      if (this.clients.has(connection)) this.bridge.send(connection, { Messages: messages });
      return false;
    });
  }

  toolResult(result, autoContinue) {
    this.anyClient()?.toolResult(result.call_id, result.outcome, autoContinue);
  }

  approval(callId, approved, autoContinue) {
    this.anyClient()?.approval(callId, approved, autoContinue);
  }

  resumeRequest(connection) {
    this.lastActivityMs = performance.now();
    this.clients.get(connection)?.resumeRequest();
  }

  resumeAck(connection, requestId) {
    this.lastActivityMs = performance.now();
    this.clients.get(connection)?.resumeAck(this.names.thinkRequest(requestId));
  }

  stop() {
    for (const client of this.clients.values()) client.close();
  }
}

/**
 * A recovery's continue asks the model with Think's prompt appended as a
 * user message it never stores: the request continues the reply before it,
 * and is reported so (the prompt is Think's means, not a message of the
 * conversation).
 */
function withoutContinuePrompt(body) {
  if (!continuePrompted(body)) return body;
  return { ...body, messages: body.messages.slice(0, -1) };
}

function continuePrompted(body) {
  const last = (body.messages ?? []).at(-1);
  return last?.role === "user" && String(typeof last.content === "string" ? last.content : JSON.stringify(last.content)).includes(CONTINUE_PROMPT);
}

/**
 * The wire shows every assistant step since the last user message as one
 * reply (`requestMessages`); Think stores them as one message per request.
 * The steps go back to the stored replies they are in, each taking as
 * many as it holds (its text and reasoning ids with them); the rest, with
 * the step asked for, are `replyId`'s (a tool continuation's new message
 * not stored yet), else the last stored reply's.
 */
export function splitReplies(messages, stored, replyId) {
  const merged = messages.at(-1);
  const user = messages.findLastIndex((message) => message.role === "user");
  if (merged?.role !== "assistant" || user < 0) return;
  const storedUser = stored.findIndex((message) => message.id === messages[user].id);
  const replies = [];
  for (let at = storedUser + 1; storedUser >= 0 && stored[at]?.role === "assistant"; at++) replies.push(stored[at]);
  const open = replyId && !replies.some((reply) => reply.id === replyId) ? replyId : null;
  const rest = steps(merged.parts.slice(0, -1));
  const split = [];
  for (const reply of replies) {
    if (rest.length === 0) break;
    split.push({ id: reply.id, role: "assistant", parts: tiedTo(rest.splice(0, steps(reply.parts).length).flat(), reply) });
  }
  const tail = [...rest.flat(), { type: "step-start" }];
  if (open || split.length === 0) split.push({ id: open ?? merged.id, role: "assistant", parts: tail });
  else split.at(-1).parts.push(...tail);
  messages.splice(-1, 1, ...split);
}

/** Parts split at each `step-start` (which opens its step). */
function steps(parts) {
  const split = [];
  for (const part of parts) {
    if (part.type === "step-start" || split.length === 0) split.push([]);
    split.at(-1).push(part);
  }
  return split;
}

/** Text and reasoning parts take the stored message's part ids, in order. */
function tiedTo(parts, message) {
  const ids = { text: [], reasoning: [] };
  for (const part of message.parts) if (part.type in ids) ids[part.type].push(part.id);
  return parts.map((part) => (part.type in ids && ids[part.type].length > 0 ? { ...part, id: ids[part.type].shift() } : part));
}

/** The assistant message right after message `leafId` in `messages`, if any. */
function replyAfter(messages, leafId) {
  const at = messages.findIndex((message) => message.id === leafId);
  const reply = at >= 0 ? messages[at + 1] : undefined;
  return reply?.role === "assistant" ? reply : undefined;
}

function safeJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
