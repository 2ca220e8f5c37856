// The `ChatTransport` the session's `Chat` sends through: what a route
// handler does with `streamText(...).toUIMessageStreamResponse()`, in
// process (as the SDK's own `DirectChatTransport` does for an agent).
// `sendMessages` converts the chat's UI messages to model messages
// (`convertToModelMessages`), runs `streamText` over the harness's model
// with the scenario's tools, step limit, retries and stall timeout, and
// returns its UI message stream (`toUIMessageStream` with the chat's
// messages as `originalMessages`, so a continuation streams into the
// assistant message it continues).
//
// Ours, not the SDK's: each request gets an id (`r<n>`) the protocol's
// model requests and frames carry, and the stream the chat reads passes
// through `observe`, which hands each UI chunk to the session on its way
// (frames to clients, `chat()` callbacks) before the chat applies it.

import { convertToModelMessages, stepCountIs, streamText } from "ai";
import { aiSdkTools, chunks } from "../node/index.mjs";

export class HarnessTransport {
  /**
   * @param {object} session what the transport needs of the session:
   *   `host`, `config`, `newId(prefix)`, `requestId(messages)`, `requestStarted(request, messages)`,
   *   `requestChunk(request, chunk)`
   */
  constructor(session) {
    this.session = session;
  }

  async sendMessages({ messages, abortSignal, body }) {
    const { host, config } = this.session;
    const last = messages.at(-1);
    const request = {
      id: this.session.requestId(messages),
      // A request that streams into the assistant message it was given continues it.
      continuation: last?.role === "assistant",
      messageId: null,
      stallMs: body?.stallMs ?? config.stall_timeout_ms,
    };
    this.session.requestStarted(request, messages);
    const tools = aiSdkTools(host, config, () => request.id);
    const result = streamText({
      model: host.model,
      messages: await convertToModelMessages(messages, { tools }),
      tools,
      stopWhen: stepCountIs(config.max_steps),
      // The scenario's budget of model calls per step for 429/5xx, as the AI SDK's retry count.
      maxRetries: Math.max(0, (config.max_model_calls_http_retry ?? 3) - 1),
      ...(request.stallMs ? { timeout: { firstChunkMs: request.stallMs, chunkMs: request.stallMs } } : {}),
      abortSignal,
      providerOptions: { turnsim: { requestId: request.id, continuation: request.continuation } },
    });
    const ui = result.toUIMessageStream({
      originalMessages: messages,
      generateMessageId: () => this.session.newId("m"),
      sendReasoning: true,
      onError: chunks.errorText,
      redactToolErrors: false,
    });
    return ui.pipeThrough(this.observe(request));
  }

  /** The stream the chat reads, each chunk shown to the session first. */
  observe(request) {
    return new TransformStream({
      transform: (chunk, controller) => {
        if (chunk.type === "start" && chunk.messageId) request.messageId = chunk.messageId;
        this.session.requestChunk(request, chunk);
        controller.enqueue(chunk);
      },
    });
  }

  /** No stream outlives the process that ran it, and a live one is never lost by this chat. */
  async reconnectToStream() {
    return null;
  }
}
