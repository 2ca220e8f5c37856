// One client connection to opencode, as its own UI is one: an event stream
// (`GET /event`) opened at connect and closed at disconnect, the session's
// messages loaded when it opens (`GET /session/:id/message`), and what the
// stream delivers shown in the protocol's frames:
//
// | opencode event | frame |
// |---|---|
// | on connect, and when a user message's text first shows | `Messages`: the session as `GET .../message` answers then |
// | `message.part.updated`, a new text / reasoning part | `text-start` / `reasoning-start` (and its text so far as a delta) |
// | `message.part.delta` of an open text / reasoning part | `text-delta` / `reasoning-delta` |
// | the part updated with `time.end` | the text not streamed yet as a delta, then `text-end` / `reasoning-end`; text that is not the streamed text run on: `Reset` of the message |
// | a tool part first seen | `tool-input-start`; once it is `running` (or later), `tool-call` with its input |
// | a tool part `completed` / `error` | `Tool` `output-available` / `output-error` |
// | `message.part.removed`, `message.removed` | `Reset` of the message as the session now holds it |
// | an assistant message with `error`, or `session.error` | `Error` of its request (once) |
// | `session.status` idle after a busy one | `Done` of each request streamed here that had no `Error` |
//
// Events are handled one at a time, in order (a `Messages` or `Reset` that
// reads the session waits for the read before the next event).

import { EventStream } from "../live/event-stream.mjs";

export class Connection {
  constructor(id, driver, bridge) {
    this.id = id;
    this.driver = driver;
    this.bridge = bridge;
    /** Parts seen: part id → `{kind, messageId, text, open, called, status}`. */
    this.parts = new Map();
    /** Assistant message id → the protocol message it is part of; user ids seen. */
    this.replyOf = new Map();
    this.usersShown = new Set();
    /** Requests streamed here and not ended; requests ended (done or error). */
    this.open = new Set();
    this.ended = new Set();
    this.chain = Promise.resolve();
    this.pending = 0;
    this.closed = false;
  }

  /** Opens the event stream, then shows the session as it stands. */
  async connect() {
    this.stream = new EventStream(`${this.driver.base}/event`, { onEvent: (event) => this.enqueue(event) });
    await this.stream.opened;
    const transcript = await this.driver.readTranscript();
    this.learn(transcript.raw);
    this.bridge.send(this.id, { Messages: transcript.messages });
  }

  close() {
    this.closed = true;
    this.stream?.close();
  }

  enqueue(event) {
    this.pending += 1;
    this.chain = this.chain
      .then(() => (this.closed ? undefined : this.handle(event)))
      .catch((error) => this.bridge.note(`connection ${this.id}: ${error.message}`))
      .finally(() => (this.pending -= 1));
  }

  /** Resolves once every event delivered so far is shown. */
  async caughtUp() {
    let chain;
    do {
      chain = this.chain;
      await chain;
    } while (chain !== this.chain);
  }

  /** Whether events wait to be shown. */
  busy() {
    return this.pending > 0;
  }

  /** Remembers the reply each stored assistant message belongs to, and the users already shown. */
  learn(raw) {
    let reply = null;
    for (const { info } of raw) {
      if (info.role === "user") {
        this.usersShown.add(info.id);
        reply = null;
        continue;
      }
      reply ??= info.id;
      this.replyOf.set(info.id, { reply, parent: info.parentID });
    }
  }

  async handle(event) {
    const properties = event.properties ?? {};
    if (!this.driver.ours(properties)) return;
    switch (event.type) {
      case "message.updated":
        return this.messageUpdated(properties.info);
      case "message.part.updated":
        return this.partUpdated(properties.part);
      case "message.part.delta":
        return this.partDelta(properties);
      case "message.part.removed":
      case "message.removed":
        return this.removed(properties.messageID);
      case "session.error":
        return this.failed(this.driver.lastRequest(), errorText(properties.error));
      case "session.status":
        if (properties.status?.type === "idle") this.turnEnded();
        return;
      case "session.idle":
        return this.turnEnded();
      default:
        return;
    }
  }

  messageUpdated(info) {
    if (!info || info.role !== "assistant") return;
    if (!this.replyOf.has(info.id)) {
      const earlier = [...this.replyOf.values()].find((entry) => entry.parent === info.parentID);
      this.replyOf.set(info.id, { reply: earlier ? earlier.reply : info.id, parent: info.parentID });
    }
    if (info.error) this.failed(this.driver.requestOfUser(info.parentID), errorText(info.error));
  }

  async partUpdated(part) {
    if (!part) return;
    if (!this.replyOf.has(part.messageID)) return this.userPart(part);
    const { reply, parent } = this.replyOf.get(part.messageID);
    const request = this.driver.requestOfUser(parent);
    if (part.type === "text" || part.type === "reasoning") return this.textPart(part, reply, request);
    if (part.type === "tool") return this.toolPart(part, reply, request);
  }

  /** A user message's text: the client shows the session with it. */
  async userPart(part) {
    if (part.type !== "text" || this.usersShown.has(part.messageID)) return;
    this.usersShown.add(part.messageID);
    const transcript = await this.driver.readTranscript();
    this.learn(transcript.raw);
    this.bridge.send(this.id, { Messages: transcript.messages });
  }

  textPart(part, reply, request) {
    const kind = part.type;
    let seen = this.parts.get(part.id);
    if (!seen) {
      seen = { kind, messageId: reply, request, text: "", open: true };
      this.parts.set(part.id, seen);
      this.chunk(request, reply, { type: `${kind}-start`, id: part.id });
    }
    if (!seen.open) return;
    const text = part.text ?? "";
    if (text.startsWith(seen.text) && text.length > seen.text.length) this.delta(seen, part.id, text.slice(seen.text.length));
    if (!part.time?.end) return;
    seen.open = false;
    this.chunk(request, reply, { type: `${kind}-end`, id: part.id });
    if (text !== seen.text) this.resetLater(request, reply);
  }

  partDelta(properties) {
    const seen = this.parts.get(properties.partID);
    if (!seen || !seen.open || properties.field !== "text") return;
    this.delta(seen, properties.partID, properties.delta ?? "");
  }

  delta(seen, partId, delta) {
    if (delta.length === 0) return;
    seen.text += delta;
    this.chunk(seen.request, seen.messageId, { type: `${seen.kind}-delta`, id: partId, delta });
  }

  toolPart(part, reply, request) {
    const status = part.state?.status;
    let seen = this.parts.get(part.id);
    if (!seen) {
      seen = { kind: "tool", messageId: reply, request, called: false, status: null };
      this.parts.set(part.id, seen);
      this.chunk(request, reply, { type: "tool-input-start", id: part.callID, name: part.tool });
    }
    if (!seen.called && status !== "pending") {
      seen.called = true;
      this.chunk(request, reply, { type: "tool-call", id: part.callID, name: part.tool, input: part.state?.input ?? {} });
    }
    if (seen.status === status) return;
    seen.status = status;
    if (status === "completed") this.bridge.send(this.id, { Tool: { call_id: part.callID, tool_name: part.tool, state: "output-available" } });
    if (status === "error") this.bridge.send(this.id, { Tool: { call_id: part.callID, tool_name: part.tool, state: "output-error" } });
  }

  chunk(request, messageId, chunk) {
    if (this.ended.has(request)) return;
    this.open.add(request);
    this.bridge.send(this.id, { Chunk: { request_id: request, message_id: messageId, chunk } });
  }

  /** A part or message taken back: the message as the session holds it now. */
  async removed(messageId) {
    const entry = this.replyOf.get(messageId);
    if (!entry) return;
    await this.resetNow(this.driver.requestOfUser(entry.parent), entry.reply);
  }

  resetLater(request, reply) {
    this.chain = this.chain.then(() => this.resetNow(request, reply));
  }

  async resetNow(request, reply) {
    const transcript = await this.driver.readTranscript();
    const message = transcript.messages.find((candidate) => candidate.id === reply) ?? { id: reply, role: "assistant", parts: [] };
    this.bridge.send(this.id, { Reset: { request_id: request, message } });
  }

  failed(request, message) {
    if (request === null || this.ended.has(request)) return;
    this.ended.add(request);
    this.open.delete(request);
    this.bridge.sendAfterStore(this.id, { Error: { request_id: request, message } });
  }

  turnEnded() {
    for (const request of this.open) {
      this.ended.add(request);
      this.bridge.sendAfterStore(this.id, { Done: { request_id: request, continuation: false } });
    }
    this.open.clear();
  }
}

function errorText(error) {
  if (!error) return "error";
  return error.data?.message ?? error.message ?? error.name ?? "error";
}
