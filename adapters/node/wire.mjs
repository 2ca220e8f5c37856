// The pipes: one JSON object a line, read from stdin and written to stdout
// with blocking calls. Blocking is the point: between two inputs the engine
// is idle by definition, and a request's reply is the very next line, so
// nothing the event loop could interleave with a read exists. It also keeps
// the event loop free of I/O, which is what lets the host tell that the
// engine's own work is done.

import { readSync, writeSync } from "node:fs";

const CHUNK_BYTES = 1 << 16;

export class Wire {
  constructor(input = 0, output = 1) {
    this._in = input;
    this._out = output;
    this._buffer = Buffer.alloc(0);
    this._closed = false;
  }

  /** The next line as raw text, without its newline; null once stdin closed. */
  readLine() {
    for (;;) {
      const newline = this._buffer.indexOf(0x0a);
      if (newline >= 0) {
        const line = this._buffer.subarray(0, newline).toString("utf8");
        this._buffer = this._buffer.subarray(newline + 1);
        return line;
      }
      if (this._closed) return null;
      const chunk = Buffer.alloc(CHUNK_BYTES);
      const read = readBlocking(this._in, chunk);
      if (read === 0) {
        this._closed = true;
        if (this._buffer.length === 0) return null;
        this._buffer = Buffer.concat([this._buffer, Buffer.from("\n")]);
        continue;
      }
      this._buffer = Buffer.concat([this._buffer, chunk.subarray(0, read)]);
    }
  }

  /** Writes one message as one line. */
  write(message) {
    const bytes = Buffer.from(`${JSON.stringify(message)}\n`, "utf8");
    let written = 0;
    while (written < bytes.length) {
      try {
        written += writeSync(this._out, bytes, written);
      } catch (error) {
        if (error.code !== "EAGAIN") throw error;
        pause();
      }
    }
  }
}

function readBlocking(fd, buffer) {
  for (;;) {
    try {
      return readSync(fd, buffer, 0, buffer.length, null);
    } catch (error) {
      if (error.code === "EOF") return 0;
      if (error.code !== "EAGAIN") throw error;
      pause();
    }
  }
}

/** A short real-time wait for a non-blocking pipe (never reached by the harness's pipes). */
function pause() {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
}
