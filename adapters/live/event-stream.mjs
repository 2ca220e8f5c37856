// A client of a server-sent events stream (`text/event-stream`), as an
// engine's UI reads its events: one GET, each event's `data:` lines joined
// and parsed as JSON, handed over in order. Closing it is a client going
// away (the socket is destroyed, as a closed browser tab leaves it).

import http from "node:http";

export class EventStream {
  /** Opens `url`; `onEvent(data)` gets each event's parsed data, `onClose()` the stream's end. */
  constructor(url, { onEvent, onClose = () => {}, headers = {} }) {
    this.closed = false;
    this.onEvent = onEvent;
    this.onClose = onClose;
    this.buffer = "";
    this.opened = new Promise((resolve, reject) => {
      this.request = http.get(url, { headers: { accept: "text/event-stream", ...headers } }, (response) => {
        if (response.statusCode !== 200) {
          reject(new Error(`${url}: HTTP ${response.statusCode}`));
          response.resume();
          return;
        }
        response.setEncoding("utf8");
        response.on("data", (text) => this._feed(text));
        response.on("close", () => this._ended());
        resolve();
      });
      this.request.on("error", (error) => {
        reject(error);
        this._ended();
      });
    });
  }

  close() {
    this.closed = true;
    this.request.destroy();
  }

  _ended() {
    if (this.ended) return;
    this.ended = true;
    if (!this.closed) this.onClose();
  }

  _feed(text) {
    this.buffer += text;
    for (;;) {
      const end = this.buffer.search(/\r?\n\r?\n/);
      if (end < 0) return;
      const block = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end).replace(/^\r?\n\r?\n/, "");
      const data = block
        .split(/\r?\n/)
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).replace(/^ /, ""))
        .join("\n");
      if (data.length === 0 || this.closed) continue;
      try {
        this.onEvent(JSON.parse(data));
      } catch (error) {
        if (error instanceof SyntaxError) continue;
        throw error;
      }
    }
  }
}

/** One JSON request to an engine's HTTP API: resolves to `{status, body}` (body parsed when JSON). */
export function httpJson(base, method, path, body, { timeoutMs = 10_000 } = {}) {
  const url = new URL(path, base);
  const text = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method, headers: text === undefined ? {} : { "content-type": "application/json", "content-length": Buffer.byteLength(text) }, timeout: timeoutMs }, (response) => {
      const parts = [];
      response.on("data", (part) => parts.push(part));
      response.on("end", () => {
        const raw = Buffer.concat(parts).toString("utf8");
        let parsed = raw;
        try {
          parsed = raw.length > 0 ? JSON.parse(raw) : null;
        } catch {
          // Not JSON: the text as it came.
        }
        resolve({ status: response.statusCode, body: parsed });
      });
      response.on("error", reject);
    });
    request.on("timeout", () => request.destroy(new Error(`${method} ${url.pathname}: no answer within ${timeoutMs} ms`)));
    request.on("error", reject);
    if (text !== undefined) request.write(text);
    request.end();
  });
}
