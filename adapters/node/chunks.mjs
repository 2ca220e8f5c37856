// The one place where the AI SDK's stream part shapes meet the protocol's
// chunk shapes (`Chunk` in engine/src/chunk.rs: kebab-case, tagged by
// `type`). Three directions:
//
// - provider side: a protocol chunk the harness streams becomes the
//   `LanguageModelV4StreamPart`s a provider would emit (`toProviderParts`);
// - engine side: what an engine reads from the AI SDK, either `streamText`'s
//   `fullStream` parts (`fromStreamPart`) or UI message stream chunks
//   (`fromUIChunk`), becomes the protocol chunk it sends to clients and
//   `chat()` callbacks. Parts the protocol has no chunk for (`start`,
//   `start-step`, tool outputs, data parts) map to null: those reach clients
//   as whole messages or `Tool` frames instead.

const UNIFIED_FROM_REASON = {
  stop: "stop",
  "tool-calls": "tool-calls",
  length: "length",
  "content-filter": "content-filter",
  error: "error",
  unknown: "other",
};

/** The protocol's finish reason for an AI SDK one (`other` and `interrupted` are `unknown`). */
export function reasonFromUnified(unified) {
  const reason = typeof unified === "object" && unified !== null ? unified.unified : unified;
  if (["stop", "tool-calls", "length", "content-filter", "error"].includes(reason)) return reason;
  return "unknown";
}

/** An AI SDK usage object from the protocol's `{input_tokens, output_tokens}`. */
export function usageFromProtocol(usage = {}) {
  const input = usage.input_tokens ?? 0;
  const output = usage.output_tokens ?? 0;
  return {
    inputTokens: { total: input, noCache: input, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: output, text: output, reasoning: undefined },
  };
}

/** The protocol's usage from an AI SDK usage object (flat or nested). */
export function usageFromSdk(usage = {}) {
  const pick = (value) => (typeof value === "object" && value !== null ? value.total : value) ?? 0;
  return { input_tokens: pick(usage.inputTokens), output_tokens: pick(usage.outputTokens) };
}

/**
 * What a provider emits for one protocol chunk. `finish` maps to nothing:
 * a provider ends a call with one `finish` part, which the protocol's
 * `finish-step` already gave.
 */
export function toProviderParts(chunk) {
  switch (chunk.type) {
    case "text-start":
    case "text-end":
    case "reasoning-start":
    case "reasoning-end":
    case "tool-input-end":
      return [{ type: chunk.type, id: chunk.id }];
    case "text-delta":
    case "reasoning-delta":
    case "tool-input-delta":
      return [{ type: chunk.type, id: chunk.id, delta: chunk.delta }];
    case "tool-input-start":
      return [{ type: "tool-input-start", id: chunk.id, toolName: chunk.name }];
    case "tool-call":
      return [{ type: "tool-call", toolCallId: chunk.id, toolName: chunk.name, input: JSON.stringify(chunk.input ?? {}) }];
    case "finish-step":
      return [
        {
          type: "finish",
          finishReason: { unified: UNIFIED_FROM_REASON[chunk.reason] ?? "other", raw: chunk.reason },
          usage: usageFromProtocol(chunk.usage),
        },
      ];
    case "finish":
      return [];
    case "error":
      return [{ type: "error", error: chunk.message }];
    default:
      throw new Error(`a model chunk the protocol does not have: ${JSON.stringify(chunk)}`);
  }
}

/** The protocol chunk for one `streamText` `fullStream` part, or null. */
export function fromStreamPart(part) {
  switch (part.type) {
    case "text-start":
    case "text-end":
    case "reasoning-start":
    case "reasoning-end":
      return { type: part.type, id: part.id };
    case "text-delta":
    case "reasoning-delta":
      return { type: part.type, id: part.id, delta: part.text ?? part.delta ?? "" };
    case "tool-input-start":
      return { type: "tool-input-start", id: part.id, name: part.toolName, ...dynamicFlag(part) };
    case "tool-input-delta":
      return { type: "tool-input-delta", id: part.id, delta: part.delta };
    case "tool-input-end":
      return { type: "tool-input-end", id: part.id };
    case "tool-call":
      return {
        type: "tool-call",
        id: part.toolCallId,
        name: part.toolName,
        input: part.input ?? {},
        ...dynamicFlag(part),
      };
    case "finish-step":
      return { type: "finish-step", reason: reasonFromUnified(part.finishReason), usage: usageFromSdk(part.usage) };
    case "finish":
      return { type: "finish", reason: reasonFromUnified(part.finishReason) };
    case "error":
      return { type: "error", message: errorText(part.error) };
    default:
      return null;
  }
}

/** The protocol chunk for one UI message stream chunk, or null. */
export function fromUIChunk(chunk) {
  switch (chunk.type) {
    case "text-start":
    case "text-end":
    case "reasoning-start":
    case "reasoning-end":
      return { type: chunk.type, id: chunk.id };
    case "text-delta":
    case "reasoning-delta":
      return { type: chunk.type, id: chunk.id, delta: chunk.delta };
    case "tool-input-start":
      return { type: "tool-input-start", id: chunk.toolCallId, name: chunk.toolName, ...dynamicFlag(chunk) };
    case "tool-input-delta":
      return { type: "tool-input-delta", id: chunk.toolCallId, delta: chunk.inputTextDelta };
    case "tool-input-available":
      return { type: "tool-call", id: chunk.toolCallId, name: chunk.toolName, input: chunk.input ?? {}, ...dynamicFlag(chunk) };
    case "error":
      return { type: "error", message: chunk.errorText ?? "error" };
    default:
      return null;
  }
}

/** A readable message for any thrown or streamed error value. */
export function errorText(error) {
  if (typeof error === "string") return error;
  if (error instanceof Error) return error.message;
  try {
    return JSON.stringify(error);
  } catch {
    return String(error);
  }
}

/** `{dynamic: true}` for a tool defined at run time; nothing otherwise, as the built-in engine writes it. */
function dynamicFlag(part) {
  return part.dynamic ? { dynamic: true } : {};
}
