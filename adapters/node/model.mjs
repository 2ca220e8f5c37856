// The model provider, on the harness's side: an AI SDK `LanguageModelV4`
// (the spec the pinned `ai` 7 calls) whose `doStream` sends `model_request`
// and whose stream parts come from `model_chunk` / `model_end`.
//
// It behaves as an HTTP provider does: `doStream` resolves when the first
// event of the call arrives (the response headers), so an HTTP error before
// any chunk is thrown from `doStream` as an `APICallError` (and the AI SDK
// may retry it); a later one errors the stream. A tool whose input finished
// streaming without a `tool-call` chunk is finalised at `finish-step`, as
// providers emit the call once its input is complete. The stream closes at
// the protocol's `finish` chunk or `model_end`, whichever comes first. An
// aborted call (the engine's abort signal) sends `model_cancel`.
//
// Per-call metadata the protocol's request carries comes from the call's
// provider options: `providerOptions: {turnsim: {requestId, step, continuation}}`;
// without `step`, a request's calls are numbered 1, 2, ... in order.

import { APICallError } from "ai";
import { toProviderParts } from "./chunks.mjs";
import { fromPrompt } from "./messages.mjs";

const CUT_MESSAGE = "model stream cut: connection closed mid-stream";

class Call {
  constructor(number) {
    this.number = number;
    /** Events that arrived before the stream had a reader. */
    this.buffered = [];
    this.controller = null;
    this.over = false;
    /** Tools whose input is streaming: id → {name, text, called}. */
    this.tools = new Map();
    this.first = new Promise((resolve, reject) => {
      this.resolveFirst = resolve;
      this.rejectFirst = reject;
    });
  }

  /** Provider parts for one protocol chunk, with tool finalisation. */
  partsFor(chunk) {
    if (chunk.type === "tool-input-start") this.tools.set(chunk.id, { name: chunk.name, text: "", called: false });
    if (chunk.type === "tool-input-delta") {
      const tool = this.tools.get(chunk.id);
      if (tool) tool.text += chunk.delta;
    }
    if (chunk.type === "tool-call") {
      const tool = this.tools.get(chunk.id);
      if (tool) tool.called = true;
    }
    const finalised = chunk.type === "finish-step" ? this.finaliseStreamedTools() : [];
    return [...finalised, ...toProviderParts(chunk)];
  }

  finaliseStreamedTools() {
    const parts = [];
    for (const [id, tool] of this.tools) {
      if (tool.called || !parses(tool.text)) continue;
      tool.called = true;
      parts.push({ type: "tool-call", toolCallId: id, toolName: tool.name, input: tool.text });
    }
    return parts;
  }
}

function parses(text) {
  if (!text) return false;
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

function httpError(end) {
  const message = end.message ? `provider error ${end.status}: ${end.message}` : `provider error ${end.status}`;
  return new APICallError({ message, url: "turnsim://model", requestBodyValues: {}, statusCode: end.status });
}

export class ModelProxy {
  constructor(host, nextCall = null) {
    this.host = host;
    /** The number the next call gets, when `init` gave it (else each call asks). */
    this._nextCall = nextCall;
    /** @type {Map<number, Call>} */
    this.calls = new Map();
    this.specificationVersion = "v4";
    this.provider = "turnsim";
    this.modelId = "scripted";
    this.supportedUrls = {};
    this._requests = 0;
    /** Model calls made so far for each request id: the protocol's `step`. */
    this._steps = new Map();
  }

  async doGenerate() {
    throw new Error("the turnsim model streams only: use streamText");
  }

  async doStream(options) {
    const signal = options.abortSignal;
    if (signal?.aborted) throw signal.reason;
    const call = this._start(options);
    const onAbort = () => this.cancel(call.number, signal.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    const first = await call.first;
    if (first.kind === "end" && first.end.kind === "http") {
      this._forget(call);
      throw httpError(first.end);
    }
    const stream = new ReadableStream({
      start: (controller) => {
        call.controller = controller;
        controller.enqueue({ type: "stream-start", warnings: [] });
        for (const event of call.buffered.splice(0)) this._deliver(call, event);
      },
      cancel: () => this.cancel(call.number),
    });
    return { stream, request: { body: {} }, response: { headers: {} } };
  }

  _start(options) {
    const meta = options.providerOptions?.turnsim ?? {};
    this._requests += 1;
    const requestId = meta.requestId ?? `request-${this._requests}`;
    const step = meta.step ?? (this._steps.get(requestId) ?? 0) + 1;
    this._steps.set(requestId, step);
    const request = {
      request_id: requestId,
      step,
      continuation: meta.continuation ?? false,
      // The engine's transcript with its stored ids when it gives one (the
      // oracle links a request to the stored messages by id); else the
      // prompt's messages under made-up ids.
      messages: this.transcript ? this.transcript() : fromPrompt(options.prompt),
    };
    const number = this._nextCall === null ? this.host.request({ type: "model_request", request }).call : this._name(request);
    const call = new Call(number);
    this.calls.set(number, call);
    return call;
  }

  /** A call named from `init`'s `next_call`: its request waits for no reply. */
  _name(request) {
    const number = this._nextCall++;
    this.host.named({ type: "model_request", request, call: number });
    return number;
  }

  /** The engine abandons a call: `model_cancel`, and its stream errors with `reason`. */
  cancel(number, reason) {
    const call = this.calls.get(number);
    if (!call || call.over) return;
    this._forget(call);
    this.host.effect({ type: "model_cancel", call: number });
    const error = reason ?? new DOMException("The model call was cancelled", "AbortError");
    call.rejectFirst(error);
    try {
      call.controller?.error(error);
    } catch {
      // already closed by its reader
    }
  }

  /** `model_chunk`. */
  chunk(number, chunk) {
    this._event(number, { kind: "chunk", chunk });
  }

  /** `model_end`. */
  end(number, end) {
    this._event(number, { kind: "end", end });
  }

  _event(number, event) {
    const call = this.calls.get(number);
    if (!call || call.over) return;
    call.resolveFirst(event);
    if (call.controller) this._deliver(call, event);
    else call.buffered.push(event);
  }

  _deliver(call, event) {
    if (call.over) return;
    const controller = call.controller;
    if (event.kind === "chunk") {
      for (const part of call.partsFor(event.chunk)) controller.enqueue(part);
      if (event.chunk.type === "finish") this._close(call);
      return;
    }
    const end = event.end;
    if (end.kind === "closed") return this._close(call);
    this._forget(call);
    controller.error(end.kind === "cut" ? new Error(CUT_MESSAGE) : httpError(end));
  }

  _close(call) {
    this._forget(call);
    call.controller.close();
  }

  _forget(call) {
    call.over = true;
    this.calls.delete(call.number);
  }
}

