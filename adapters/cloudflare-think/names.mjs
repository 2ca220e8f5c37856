// The names Think's requests and messages go by in the history: the
// built-in engine's (`r1`, `m2`, from one counter), so a scenario written
// against it (`terminal_frames: ["done r1"]`) names the same ones here.
//
// A client's request and its user message are named as they are sent, and
// those names are the ids Think is sent (it keeps a client's ids). Think's
// own ids (a continuation's request, an assistant message's UUID, the
// driver's name for a reply not stored yet) are named the first time the
// driver sees them, and shown under that name wherever they cross to the
// harness; a second id of the same message (Think's UUID for a reply the
// driver named first) is bound to its name. Kept in the run's scratch
// directory, so a restarted object's messages keep their names.

import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";

export class Names {
  /** `file`: where the names are kept across generations (none: in memory only). */
  constructor(file = null) {
    this.file = file;
    const kept = file && existsSync(file) ? JSON.parse(readFileSync(file, "utf8")) : { counter: 0, names: {}, issued: [] };
    this.counter = kept.counter;
    /** Think's id (or the driver's) -> the name shown. */
    this.names = new Map(Object.entries(kept.names));
    /** Every name given (a client's ids are names without a Think id of their own). */
    this.issued = new Set(kept.issued);
  }

  /** A fresh `{request, message}` pair for a client's user message: both are the ids Think is sent. */
  userMessage() {
    const request = this.fresh("r");
    const message = this.fresh("m");
    this.save();
    return { request, message };
  }

  /** The name of request `id`. */
  request(id) {
    return this.of(id, "r");
  }

  /** The name of message `id`. */
  message(id) {
    return this.of(id, "m");
  }

  /** `id` is another id of the message named as `named` is (a name, or an id already named). */
  bind(id, named) {
    if (this.names.has(id) || this.issued.has(id)) return;
    this.names.set(id, this.message(named));
    this.save();
  }

  /** Think's id of the request named `name` (the harness answers an offer by the name it was shown). */
  thinkRequest(name) {
    for (const [id, shown] of this.names) if (shown === name && id !== name) return id;
    return name;
  }

  /** A frame as the harness is shown it. */
  frame(frame) {
    if (typeof frame !== "object" || frame === null) return frame;
    const [kind, body] = Object.entries(frame)[0] ?? [];
    if (kind === "Messages") return { Messages: this.messages(body) };
    if (!body || typeof body !== "object" || !("request_id" in body)) return frame;
    const named = { ...body, request_id: this.request(body.request_id) };
    if ("message_id" in body) named.message_id = this.message(body.message_id);
    return { [kind]: named };
  }

  /** Protocol messages under their names. */
  messages(messages) {
    return messages.map((message) => ({ ...message, id: this.message(message.id) }));
  }

  of(id, prefix) {
    if (this.issued.has(id)) return id;
    let name = this.names.get(id);
    if (!name) {
      name = this.fresh(prefix);
      this.names.set(id, name);
      this.save();
    }
    return name;
  }

  fresh(prefix) {
    const name = `${prefix}${++this.counter}`;
    this.issued.add(name);
    return name;
  }

  /** Written whole or not at all: an eviction kills this process at any instant. */
  save() {
    if (!this.file) return;
    const kept = JSON.stringify({ counter: this.counter, names: Object.fromEntries(this.names), issued: [...this.issued] });
    writeFileSync(`${this.file}.next`, kept);
    renameSync(`${this.file}.next`, this.file);
  }
}
