// The names opencode's messages go by in the history: the built-in
// engine's (`docs/protocol.md`), so a scenario written against it names the
// same messages and requests for opencode. One counter names a user
// message's request and the message (`r1`, `m2`), then its reply (`m3`);
// the next user message is `r4`, `m5`, its reply `m6`. A reply is the
// assistant messages answering one user message (one a step,
// `transcript.mjs`), named after the first of them.
//
// Names are given in the order the driver first sees the messages (the
// session's order, or its event stream's), and kept in the run's scratch
// directory, so a restarted server's messages keep their names.

import { existsSync, readFileSync, writeFileSync } from "node:fs";

export class Names {
  constructor(file) {
    this.file = file;
    const kept = existsSync(file) ? JSON.parse(readFileSync(file, "utf8")) : { counter: 0, users: {}, replies: {} };
    this.counter = kept.counter;
    this.users = new Map(Object.entries(kept.users));
    this.replies = new Map(Object.entries(kept.replies));
  }

  /** A user message's `{request, message}` names. */
  user(id) {
    if (!this.users.has(id)) {
      this.users.set(id, { request: `r${++this.counter}`, message: `m${++this.counter}` });
      this.save();
    }
    return this.users.get(id);
  }

  /** The name of the reply whose first assistant message is `id`. */
  reply(id) {
    if (!this.replies.has(id)) {
      this.replies.set(id, `m${++this.counter}`);
      this.save();
    }
    return this.replies.get(id);
  }

  /** The request of the user message named `message` (a protocol id), if it is one. */
  requestOfMessage(message) {
    for (const names of this.users.values()) if (names.message === message) return names.request;
    return null;
  }

  /** The request of the latest user message. */
  lastRequest() {
    let last = null;
    for (const names of this.users.values()) last = names.request;
    return last;
  }

  save() {
    const kept = { counter: this.counter, users: Object.fromEntries(this.users), replies: Object.fromEntries(this.replies) };
    writeFileSync(this.file, JSON.stringify(kept));
  }
}
