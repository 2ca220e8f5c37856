// The model script on the wire: the protocol's chunks (the AI SDK stream
// parts a scenario's model streams) rendered as an OpenAI-compatible chat
// completions stream (`stream: true`), one `data:` event per chunk that
// carries anything, as a provider sends it:
//
// | chunk | on the wire |
// |---|---|
// | `text-delta` | `delta.content` |
// | `reasoning-delta` | `delta.reasoning_content` |
// | `tool-input-start` | a `delta.tool_calls` entry with the call's `id`, `type: function`, `function.name` and empty `arguments` |
// | `tool-input-delta` | the entry's `function.arguments`, as split in the script (a cut mid input is a cut inside a JSON string) |
// | `tool-call` | nothing when its input streamed; otherwise the whole call in one entry |
// | `finish-step` | `finish_reason` (`stop`, `tool_calls`, `length`, `content_filter`; `error` as `error`; `unknown` as no finish reason at all, as a truncated stream ends), then a usage event (`prompt_tokens`, `completion_tokens`) |
// | `finish` | `data: [DONE]` |
// | `error` | `data: {"error": {"message": ..}}` (in band) |
// | `text-start`, `text-end`, `reasoning-start`, `reasoning-end`, `tool-input-end` | nothing (the wire has no part boundaries) |
//
// The first event's delta carries `role: "assistant"`. Tool calls are
// indexed in the order they start.

const FINISH_REASONS = {
  stop: "stop",
  "tool-calls": "tool_calls",
  length: "length",
  "content-filter": "content_filter",
  error: "error",
  unknown: null,
};

/** Renders one model call's chunks as SSE text, chunk by chunk. */
export class SseRenderer {
  constructor({ model = "turnsim", id = "chatcmpl-turnsim", toolName = (name) => name } = {}) {
    this.model = model;
    this.id = id;
    this.toolName = toolName;
    this.created = Math.floor(Date.now() / 1000);
    /** Tool call ids by index, in the order they started; and whether their input streamed. */
    this.toolIndex = new Map();
    this.toolStreamed = new Set();
    this.sentRole = false;
  }

  /** The SSE text for one chunk ("" when the wire has nothing for it). */
  render(chunk) {
    switch (chunk.type) {
      case "text-delta":
        return this._delta({ content: chunk.delta });
      case "reasoning-delta":
        return this._delta({ reasoning_content: chunk.delta });
      case "tool-input-start":
        return this._delta({ tool_calls: [this._toolStart(chunk.id, chunk.name, "")] });
      case "tool-input-delta":
        this.toolStreamed.add(chunk.id);
        return this._delta({ tool_calls: [{ index: this._index(chunk.id), function: { arguments: chunk.delta } }] });
      case "tool-call":
        if (this.toolIndex.has(chunk.id)) return "";
        return this._delta({ tool_calls: [this._toolStart(chunk.id, chunk.name, JSON.stringify(chunk.input ?? {}))] });
      case "finish-step":
        return this._finish(chunk.reason) + this._usage(chunk.usage);
      case "finish":
        return "data: [DONE]\n\n";
      case "error":
        return event({ error: { message: chunk.message, type: "server_error" } });
      default:
        return "";
    }
  }

  /** Half an event: what a connection cut mid-event leaves on the wire. */
  torn() {
    const whole = this._event({ index: 0, delta: { content: "" }, finish_reason: null });
    return whole.slice(0, Math.floor(whole.length / 2));
  }

  _toolStart(callId, name, args) {
    const index = this._index(callId);
    return { index, id: callId, type: "function", function: { name: this.toolName(name), arguments: args } };
  }

  _index(callId) {
    if (!this.toolIndex.has(callId)) this.toolIndex.set(callId, this.toolIndex.size);
    return this.toolIndex.get(callId);
  }

  _delta(delta) {
    if (!this.sentRole) {
      this.sentRole = true;
      delta = { role: "assistant", ...delta };
    }
    return this._event({ index: 0, delta, finish_reason: null });
  }

  _finish(reason) {
    const wire = FINISH_REASONS[reason];
    if (wire === null || wire === undefined) return "";
    return this._event({ index: 0, delta: {}, finish_reason: wire });
  }

  _usage(usage) {
    const prompt = usage?.input_tokens ?? 0;
    const completion = usage?.output_tokens ?? 0;
    return event({ id: this.id, object: "chat.completion.chunk", created: this.created, model: this.model, choices: [], usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion } });
  }

  _event(choice) {
    return event({ id: this.id, object: "chat.completion.chunk", created: this.created, model: this.model, choices: [choice] });
  }
}

function event(payload) {
  return `data: ${JSON.stringify(payload)}\n\n`;
}

/** A whole answer in one go: the default for requests the scenario did not script. */
export function wholeAnswer(text, options) {
  const renderer = new SseRenderer(options);
  const chunks = [
    { type: "text-delta", id: "t", delta: text },
    { type: "finish-step", reason: "stop", usage: { input_tokens: 1, output_tokens: 1 } },
    { type: "finish", reason: "stop" },
  ];
  return chunks.map((chunk) => renderer.render(chunk)).join("");
}
