// What a consumer of opencode's event stream is shown of the session's
// replies, in the protocol's chunk vocabulary. opencode's own UI reads the
// same events (`GET /event`); a client connection (`connection.mjs`) and
// a `chat()` caller (`chat-call.mjs`) each hold one view and show what it
// reports in their own terms:
//
// | opencode event | reported |
// |---|---|
// | `message.part.updated`, a new text / reasoning part | `text-start` / `reasoning-start` (and its text so far as a delta) |
// | `message.part.delta` of an open text / reasoning part | `text-delta` / `reasoning-delta` |
// | the part updated with `time.end` | the text not streamed yet as a delta, then `text-end` / `reasoning-end`; text other than the streamed text run on: a reset of the reply |
// | a tool part first seen | `tool-input-start`; once it is `running` (or later), its input's JSON as one `tool-input-delta` (opencode's events give a call's input whole, once complete), then `tool-call` |
// | a tool part `completed` / `error` | the tool's state |
// | `message.part.removed`, `message.removed` | a reset of the reply, as the session now holds it |
// | an assistant message with `error`, or `session.error` | its request failed (once) |
// | `session.status` idle | the turn ended |
// | a user message's text part | the user's message is in |
//
// A reply is the assistant messages answering one user message (one a
// step, `transcript.mjs`), shown under the first one's id; its request is
// the user message's (`rN`, the Nth user message). Events are handled one
// at a time, in order: a handler that reads the session waits for the read
// before the next event is handled.

export class ReplyView {
  constructor(driver) {
    this.driver = driver;
    /** Parts seen: part id → `{kind, messageId, request, text, open, called, status}`. */
    this.parts = new Map();
    /** Assistant message id → `{reply, parent}`: the protocol message it is part of. */
    this.replyOf = new Map();
    /** User messages whose text has been shown. */
    this.usersShown = new Set();
    this.chain = Promise.resolve();
    this.pending = 0;
    this.closed = false;
    this.lastEventId = "";
  }

  /** Handles `event` after every event before it. */
  enqueue(event) {
    if (typeof event.id === "string") this.lastEventId = event.id;
    this.pending += 1;
    this.chain = this.chain
      .then(() => (this.closed ? undefined : this.handle(event)))
      .catch((error) => this.driver.bridge.note(`${this.describe()}: ${error.message}`))
      .finally(() => (this.pending -= 1));
  }

  /** Resolves once every event delivered so far is handled. */
  async caughtUp() {
    let chain;
    do {
      chain = this.chain;
      await chain;
    } while (chain !== this.chain);
  }

  busy() {
    return this.pending > 0;
  }

  /**
   * Resolves once this view's stream has delivered event `id` (opencode's
   * event ids ascend) and every event so far is handled, or after `ms`:
   * two streams of one server deliver the same events, not at the same
   * moment.
   */
  async reached(id, ms) {
    const deadline = performance.now() + ms;
    while (id && !(this.lastEventId >= id) && performance.now() < deadline && !this.closed) await new Promise((resolve) => setTimeout(resolve, 2));
    await this.caughtUp();
  }

  /** Remembers the reply each stored assistant message belongs to, and the users whose text is shown. */
  learn(raw) {
    let reply = null;
    for (const { info, parts } of raw) {
      if (info.role === "user") {
        if (parts.some((part) => part.type === "text")) this.usersShown.add(info.id);
        reply = null;
        continue;
      }
      reply ??= this.driver.replyName(info.id);
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
        return this.failure(this.driver.lastRequest(), errorText(properties.error));
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
      this.replyOf.set(info.id, { reply: earlier ? earlier.reply : this.driver.replyName(info.id), parent: info.parentID });
    }
    if (info.error) this.failure(this.driver.requestOfUser(info.parentID), errorText(info.error));
  }

  async partUpdated(part) {
    if (!part) return;
    if (!this.replyOf.has(part.messageID)) {
      if (part.type !== "text" || this.usersShown.has(part.messageID)) return;
      this.usersShown.add(part.messageID);
      return this.userText(part);
    }
    const { reply, parent } = this.replyOf.get(part.messageID);
    const request = this.driver.requestOfUser(parent);
    if (part.type === "text" || part.type === "reasoning") return this.textPart(part, reply, request);
    if (part.type === "tool") return this.toolPart(part, reply, request);
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
    if (text !== seen.text) return this.resetNow(request, reply);
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
      const input = part.state?.input ?? {};
      this.chunk(request, reply, { type: "tool-input-delta", id: part.callID, delta: JSON.stringify(input) });
      this.chunk(request, reply, { type: "tool-call", id: part.callID, name: part.tool, input });
    }
    if (seen.status === status) return;
    seen.status = status;
    if (status === "completed") this.toolState(request, part, "output-available");
    if (status === "error") this.toolState(request, part, "output-error");
  }

  /** A part or message taken back: the reply as the session holds it now. */
  async removed(messageId) {
    const entry = this.replyOf.get(messageId);
    if (!entry) return;
    await this.resetNow(this.driver.requestOfUser(entry.parent), entry.reply);
  }

  async resetNow(request, reply) {
    const transcript = await this.driver.readTranscript();
    const message = transcript.messages.find((candidate) => candidate.id === reply) ?? { id: reply, role: "assistant", parts: [] };
    this.reset(request, message);
  }

  // What a consumer does with what the view reports.
  describe() {
    return "a view of opencode's events";
  }
  userText(_part) {}
  chunk(_request, _messageId, _chunk) {}
  toolState(_request, _part, _state) {}
  reset(_request, _message) {}
  failure(_request, _text) {}
  turnEnded() {}
}

export function errorText(error) {
  if (!error) return "error";
  return error.data?.message ?? error.message ?? error.name ?? "error";
}
