// The bridge's HTTP server, the world's side of the engine's network: a
// fault-injecting OpenAI-compatible model provider (`/v1/chat/completions`
// with `stream: true`, `/v1/models`) and the endpoint server tools call
// back to (`/turnsim/tool`). One server a generation, on a fresh port.
//
// Each scripted chat completions request is a model call of the scenario:
// it is reported to the bridge (which asks the harness for its call
// number), and then plays what the world sends for that number: chunks as
// SSE (`sse.mjs`), and its end:
//
// | the world's end | on the wire |
// |---|---|
// | `closed` | the response ends (an empty 200 stream when no chunk came) |
// | `cut` | half an SSE event, then (25 ms later, so what was sent is read) the socket reset; before any chunk, a reset with no response |
// | `http` before the first chunk | that status, a JSON error body, and `retry-after`/`retry-after-ms` when the driver sets them |
// | `http` after chunks | an in-band `{"error": ..}` event with the status, then the end (headers cannot change mid-stream) |
// | a parked call | nothing: the connection stays open and silent (before headers, or after any chunk) |
//
// Headers go out with the first chunk, so an HTTP error or a stall before
// it happens before headers, as at a real provider. A request the engine
// abandons (its connection closes before the end) is reported, and becomes
// `model_cancel`. Requests the driver says the scenario did not script (a
// title generator, a summariser) get the driver's default answer at once
// and are only noted, never sent to the world as model calls.

import http from "node:http";
import { SseRenderer, wholeAnswer } from "./sse.mjs";

/** How long what was sent before a cut has to reach the engine before the reset, in ms. */
const CUT_AFTER_MS = 25;

export class LiveServer {
  /**
   * `observe(item)` receives what happened, in order: `{kind: "model-open", call}`,
   * `{kind: "model-close", call}`, `{kind: "tool-start", tool}`, `{kind: "note", text}`.
   * `classify(body)` returns null for a scripted request, or `{answer, why}`.
   */
  constructor({ observe, classify, toolName = (name) => name, retryAfterMs = null }) {
    this.observe = observe;
    this.classify = classify;
    this.toolName = toolName;
    this.retryAfterMs = retryAfterMs;
    /** Model calls by the world's call number, once it is known. */
    this.calls = new Map();
    /** Calls whose connection is still open. */
    this.open = new Set();
    /** Server tools waiting for their result, by call id. */
    this.tools = new Map();
    this.sequence = 0;
    this.server = http.createServer((request, response) => this._route(request, response));
    this.server.keepAliveTimeout = 1000;
  }

  /** Listens on a fresh port of 127.0.0.1; resolves to the base URL. */
  async listen() {
    await new Promise((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(0, "127.0.0.1", resolve);
    });
    this.port = this.server.address().port;
    this.url = `http://127.0.0.1:${this.port}`;
    return this.url;
  }

  /** Whether a request or a tool is under way: the engine may still act. */
  busy() {
    return this.open.size > 0 || this.tools.size > 0;
  }

  /** The world numbered a call: chunks for that number are this call's. */
  numbered(call, number) {
    call.number = number;
    this.calls.set(number, call);
  }

  /** A chunk of call `number`, onto its wire. */
  chunk(number, chunk) {
    const call = this.calls.get(number);
    if (!call || call.finished) return;
    this._headers(call);
    call.response.write(call.renderer.render(chunk));
  }

  /** The world ended call `number`. */
  end(number, end) {
    const call = this.calls.get(number);
    if (!call || call.finished) return;
    call.finished = true;
    this.open.delete(call);
    if (end.kind === "closed") {
      this._headers(call);
      call.response.end();
    } else if (end.kind === "cut") {
      this._cut(call);
    } else if (end.kind === "http") {
      this._httpError(call, end.status, end.message);
    }
  }

  /** A server tool's result came back. */
  toolDone(callId, outcome) {
    const tool = this.tools.get(callId);
    if (!tool) return;
    this.tools.delete(callId);
    if (!tool.response.writableEnded) tool.response.end(JSON.stringify({ outcome: outcome ?? null }));
  }

  /** Closes every connection at once (the generation is over). */
  close() {
    for (const call of this.open) call.response.socket?.destroy();
    for (const tool of this.tools.values()) tool.response.socket?.destroy();
    this.server.closeAllConnections?.();
    this.server.close();
  }

  async _route(request, response) {
    const body = await readBody(request);
    const path = (request.url ?? "").split("?")[0];
    if (request.method === "GET" && path.endsWith("/models")) {
      return json(response, 200, { object: "list", data: [{ id: "turnsim", object: "model" }] });
    }
    if (request.method === "POST" && path.endsWith("/chat/completions")) return this._completion(request, response, body);
    if (request.method === "POST" && path === "/turnsim/tool") return this._tool(request, response, body);
    json(response, 404, { error: { message: `no route ${request.method} ${path}` } });
  }

  _completion(request, response, text) {
    let body;
    try {
      body = JSON.parse(text);
    } catch {
      return json(response, 400, { error: { message: "the request body is not JSON" } });
    }
    response.socket?.setNoDelay(true);
    const unscripted = this.classify(body);
    if (unscripted) {
      this.observe({ kind: "note", text: `provider: ${unscripted.why} answered by default` });
      response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      return response.end(wholeAnswer(unscripted.answer, { toolName: this.toolName }));
    }
    const call = { sequence: ++this.sequence, body, request, response, number: null, finished: false, headersSent: false };
    call.renderer = new SseRenderer({ id: `chatcmpl-${call.sequence}`, model: body.model ?? "turnsim", toolName: this.toolName });
    this.open.add(call);
    response.on("close", () => {
      if (call.finished) return;
      call.finished = true;
      this.open.delete(call);
      this.observe({ kind: "model-close", call });
    });
    this.observe({ kind: "model-open", call });
  }

  _tool(request, response, text) {
    let body;
    try {
      body = JSON.parse(text);
    } catch {
      return json(response, 400, { error: "the tool request is not JSON" });
    }
    const tool = { callId: String(body.call_id), toolName: String(body.tool_name), input: body.input ?? {}, context: body.context ?? {}, response };
    this.tools.set(tool.callId, tool);
    response.on("close", () => {
      if (this.tools.get(tool.callId) === tool && !response.writableEnded) {
        this.tools.delete(tool.callId);
        this.observe({ kind: "note", text: `server tool ${tool.callId}: the engine stopped waiting for its result` });
      }
    });
    this.observe({ kind: "tool-start", tool });
  }

  _headers(call) {
    if (call.headersSent) return;
    call.headersSent = true;
    call.response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
    call.response.flushHeaders();
  }

  _cut(call) {
    const socket = call.response.socket;
    if (call.headersSent) call.response.write(call.renderer.torn());
    // A reset, not a clean close: the provider's connection dropped. Not at
    // once: a reset makes the kernel drop what the peer has not read yet,
    // and what a provider sent before its connection dropped did arrive.
    setTimeout(() => (socket?.resetAndDestroy ? socket.resetAndDestroy() : socket?.destroy()), CUT_AFTER_MS);
  }

  _httpError(call, status, message) {
    const error = { error: { message: message || `provider error ${status}`, type: errorType(status), code: status } };
    if (call.headersSent) {
      call.response.end(`data: ${JSON.stringify(error)}\n\n`);
      return;
    }
    const headers = {};
    if (this.retryAfterMs !== null && (status === 429 || status >= 500)) {
      headers["retry-after-ms"] = String(this.retryAfterMs);
      headers["retry-after"] = String(Math.max(1, Math.ceil(this.retryAfterMs / 1000)));
    }
    json(call.response, status, error, headers);
  }
}

/** OpenAI's error type for a status: a client's mistake is not the server's. */
function errorType(status) {
  if (status === 429) return "rate_limit_error";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

function json(response, status, payload, headers = {}) {
  const text = JSON.stringify(payload);
  response.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers });
  response.end(text);
}

function readBody(request) {
  return new Promise((resolve) => {
    const parts = [];
    request.on("data", (part) => parts.push(part));
    request.on("end", () => resolve(Buffer.concat(parts).toString("utf8")));
    request.on("error", () => resolve(""));
  });
}
