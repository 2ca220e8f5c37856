// The protocol's pipes in real time: lines from stdin read as they come
// (the event loop keeps running between them: the engine, its HTTP
// traffic and its event streams go on while the harness thinks), and one
// JSON object a line written to stdout at once. Unlike the Node SDK's
// wire, nothing here blocks: a live bridge is never idle in the sense the
// virtual-time SDK means, it only answers `idle` when the harness may move
// time on.

import { createInterface } from "node:readline";
import { writeSync } from "node:fs";
import { Buffer } from "node:buffer";

export class Wire {
  constructor(input = process.stdin, output = 1) {
    this._out = output;
    /** Lines read and not yet taken. */
    this._lines = [];
    /** Who waits for the next line. */
    this._waiting = [];
    this._closed = false;
    const lines = createInterface({ input, crlfDelay: Infinity });
    lines.on("line", (line) => this._push(line));
    lines.on("close", () => this._close());
  }

  _push(line) {
    if (line.trim().length === 0) return;
    const waiter = this._waiting.shift();
    if (waiter) waiter(line);
    else this._lines.push(line);
  }

  _close() {
    this._closed = true;
    for (const waiter of this._waiting.splice(0)) waiter(null);
  }

  /** The next message, parsed; null once stdin closed. */
  async next() {
    const line = this._lines.length > 0 ? this._lines.shift() : this._closed ? null : await new Promise((resolve) => this._waiting.push(resolve));
    if (line === null) return null;
    try {
      return JSON.parse(line);
    } catch (error) {
      throw new Error(`the harness sent a line that is not JSON (${error.message}): ${line.slice(0, 200)}`);
    }
  }

  /** Writes one message as one line, now. */
  write(message) {
    writeAll(this._out, Buffer.from(`${JSON.stringify(message)}\n`, "utf8"));
  }

  /** Sends a request and waits for its `reply`: the harness sends nothing else in between. */
  async request(message) {
    this.write(message);
    const reply = await this.next();
    if (reply === null) throw new Error(`stdin closed while waiting for the reply to a ${message.type}`);
    if (reply.type !== "reply") throw new Error(`expected the reply to a ${message.type}, got a ${reply.type}`);
    return reply.value;
  }
}

function writeAll(fd, bytes) {
  let written = 0;
  while (written < bytes.length) {
    try {
      written += writeSync(fd, bytes, written);
    } catch (error) {
      if (error.code !== "EAGAIN") throw error;
    }
  }
}
