// The pipes: one JSON object a line, read from stdin and written to stdout
// with blocking calls (effects queued until the engine asks something or
// goes idle, then written at once). Blocking is the point: between two inputs the engine
// is idle by definition, and a request's reply is the very next line, so
// nothing the event loop could interleave with a read exists. It also keeps
// the event loop free of I/O, which is what lets the host tell that the
// engine's own work is done.

import { readSync, writeSync } from "node:fs";
import { Buffer } from "node:buffer";
import { StringDecoder } from "node:string_decoder";

const CHUNK_BYTES = 1 << 16;

export class Wire {
  constructor(input = 0, output = 1) {
    this._in = input;
    this._out = output;
    /** One read's landing place, reused. */
    this._chunk = Buffer.allocUnsafe(CHUNK_BYTES);
    /** Decodes reads as they come: a character split across two reads is held back until whole. */
    this._decoder = new StringDecoder("utf8");
    /** Text read and not yet taken as a line. */
    this._pending = "";
    this._closed = false;
    /** Lines written and not yet flushed. */
    this._outgoing = "";
  }

  /** The next line as raw text, without its newline; null once stdin closed. */
  readLine() {
    for (;;) {
      const newline = this._pending.indexOf("\n");
      if (newline >= 0) {
        const line = this._pending.slice(0, newline);
        this._pending = this._pending.slice(newline + 1);
        return line;
      }
      if (this._closed) return null;
      const read = readBlocking(this._in, this._chunk);
      if (read === 0) {
        this._closed = true;
        this._pending += this._decoder.end();
        if (this._pending.length > 0) this._pending += "\n";
        continue;
      }
      this._pending += this._decoder.write(this._chunk.subarray(0, read));
    }
  }

  /**
   * Queues one message as one line. Lines go out together at `flush`: when
   * the engine asks something (a request) or goes idle, the only moments
   * the harness reads, so one write carries every effect of a stretch.
   */
  write(message) {
    this._outgoing += `${JSON.stringify(message)}\n`;
  }

  /** Writes every queued line. */
  flush() {
    if (this._outgoing.length === 0) return;
    const text = this._outgoing;
    this._outgoing = "";
    // A blocking pipe takes the whole string in one write, encoded by Node
    // itself; only what a short write left goes through a buffer.
    let written = 0;
    try {
      written = writeSync(this._out, text);
    } catch (error) {
      if (error.code !== "EAGAIN") throw error;
    }
    if (written < Buffer.byteLength(text, "utf8")) this._writeRest(Buffer.from(text, "utf8"), written);
  }

  _writeRest(bytes, written) {
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
