// The store's message vocabulary (`Message` and `Part` in
// engine/src/transcript.rs) and its translations:
//
// - `fromUIMessage` / `toUIMessage`: an AI SDK `UIMessage` (what engines
//   built on the AI SDK keep) and the stored message the oracle reads;
// - `fromPrompt`: the prompt a `LanguageModel` is called with, as the
//   messages of the protocol's `model_request` (what the model was asked).
//
// A stored text part needs an id the UI part does not have; it is the
// part's position, which is stable for one message.

/**
 * @typedef {{type: "step-start"} | {type: "text" | "reasoning", id: string, text: string, state: "streaming" | "done"}
 *   | {type: "tool", call_id: string, tool_name: string, state: string, input_text: string, input: unknown,
 *      output: unknown, error_text: string | null, approval: {id: string, approved: boolean | null} | null, repaired: boolean,
 *      dynamic?: boolean}} Part
 * @typedef {{id: string, role: "user" | "assistant", parts: Part[]}} Message
 */

/** A stored user message with one text part, as the built-in engine stores it. */
export function userMessage(id, text) {
  return { id, role: "user", parts: [{ type: "text", id: "user", text, state: "done" }] };
}

/** A stored tool part. */
export function toolPart(fields) {
  return {
    type: "tool",
    call_id: fields.call_id,
    tool_name: fields.tool_name,
    state: fields.state,
    input_text: fields.input_text ?? "",
    input: fields.input ?? null,
    output: fields.output ?? null,
    error_text: fields.error_text ?? null,
    approval: fields.approval ?? null,
    repaired: fields.repaired ?? false,
    // A tool defined at run time (`dynamic-tool`); left out when false, as the built-in engine stores it.
    ...(fields.dynamic ? { dynamic: true } : {}),
  };
}

/** The tool name of an AI SDK tool part (`tool-<name>` or `dynamic-tool`), or null. */
export function uiToolName(part) {
  if (part.type === "dynamic-tool") return part.toolName;
  if (typeof part.type === "string" && part.type.startsWith("tool-")) return part.type.slice("tool-".length);
  return null;
}

/** A stored message from an AI SDK `UIMessage`. `repairedText` marks repaired tool calls. */
export function fromUIMessage(message, repairedText) {
  const parts = [];
  message.parts.forEach((part, index) => {
    const stored = fromUIPart(part, index, repairedText);
    if (stored) parts.push(stored);
  });
  return { id: message.id, role: message.role === "user" ? "user" : "assistant", parts };
}

function fromUIPart(part, index, repairedText) {
  if (part.type === "step-start") return { type: "step-start" };
  if (part.type === "text" || part.type === "reasoning") {
    const id = partId(part, index);
    return { type: part.type, id, text: part.text ?? "", state: part.state === "streaming" ? "streaming" : "done" };
  }
  const toolName = uiToolName(part);
  if (toolName === null) return null;
  const approval = part.approval ? { id: part.approval.id ?? "", approved: part.approval.approved ?? null } : null;
  return toolPart({
    call_id: part.toolCallId,
    tool_name: toolName,
    state: part.state,
    input_text: part.input === undefined ? "" : JSON.stringify(part.input),
    input: part.state === "input-streaming" ? null : (part.input ?? null),
    output: part.state === "output-available" ? (part.output ?? null) : null,
    error_text: part.errorText ?? null,
    approval,
    repaired: repairedText !== undefined && part.state === "output-error" && part.errorText === repairedText,
    dynamic: part.type === "dynamic-tool",
  });
}

function partId(part, index) {
  return typeof part.id === "string" ? part.id : `${part.type}-${index}`;
}

/** An AI SDK `UIMessage` from a stored message (the inverse of `fromUIMessage`). */
export function toUIMessage(message) {
  return { id: message.id, role: message.role, parts: message.parts.map(toUIPart) };
}

function toUIPart(part) {
  if (part.type === "step-start") return { type: "step-start" };
  if (part.type === "text" || part.type === "reasoning") return { type: part.type, text: part.text, state: part.state };
  const ui = part.dynamic
    ? { type: "dynamic-tool", toolName: part.tool_name, toolCallId: part.call_id, state: part.state }
    : { type: `tool-${part.tool_name}`, toolCallId: part.call_id, state: part.state };
  if (part.state === "input-streaming") {
    if (part.input_text) ui.input = safeParse(part.input_text);
  } else {
    ui.input = part.input ?? {};
  }
  if (part.state === "output-available") ui.output = part.output;
  if (part.error_text !== null && part.error_text !== undefined) ui.errorText = part.error_text;
  if (part.approval) {
    ui.approval = { id: part.approval.id };
    if (part.approval.approved !== null) ui.approval.approved = part.approval.approved;
  }
  return ui;
}

function safeParse(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * The messages of a `model_request`: a `LanguageModelV4Prompt` in the store's
 * vocabulary. Tool results in `tool` messages settle the calls they answer;
 * a call with no result stays `input-available` (the provider then refuses
 * the request, as a real one would).
 */
export function fromPrompt(prompt) {
  const messages = [];
  const calls = new Map();
  prompt.forEach((entry, index) => {
    const id = `prompt-${index}`;
    if (entry.role === "user") {
      const parts = entry.content
        .filter((part) => part.type === "text")
        .map((part, at) => ({ type: "text", id: `user-${at}`, text: part.text, state: "done" }));
      messages.push({ id, role: "user", parts });
    } else if (entry.role === "assistant") {
      messages.push({ id, role: "assistant", parts: assistantParts(entry.content, calls) });
    } else if (entry.role === "tool") {
      for (const part of entry.content) settleFromPrompt(part, calls);
    }
  });
  return messages;
}

function assistantParts(content, calls) {
  const parts = [];
  content.forEach((part, at) => {
    if (part.type === "text" || part.type === "reasoning") {
      parts.push({ type: part.type, id: `${part.type}-${at}`, text: part.text, state: "done" });
    } else if (part.type === "tool-call") {
      const input = typeof part.input === "string" ? safeParse(part.input) ?? {} : part.input ?? {};
      const tool = toolPart({
        call_id: part.toolCallId,
        tool_name: part.toolName,
        state: "input-available",
        input_text: JSON.stringify(input),
        input,
      });
      calls.set(part.toolCallId, tool);
      parts.push(tool);
    } else if (part.type === "tool-approval-request") {
      const tool = calls.get(part.toolCallId);
      if (tool) {
        tool.state = "approval-requested";
        tool.approval = { id: part.approvalId, approved: null };
      }
    } else if (part.type === "tool-result") {
      settleFromPrompt(part, calls);
    }
  });
  return parts;
}

function settleFromPrompt(part, calls) {
  if (part.type === "tool-approval-response") {
    const tool = [...calls.values()].find((call) => call.approval?.id === part.approvalId);
    if (tool) {
      tool.approval.approved = part.approved;
      if (tool.state === "approval-requested") tool.state = part.approved ? "approval-responded" : "output-denied";
    }
    return;
  }
  if (part.type !== "tool-result") return;
  const tool = calls.get(part.toolCallId);
  if (!tool) return;
  const output = part.output ?? {};
  if (output.type === "error-text" || output.type === "error-json") {
    tool.state = "output-error";
    tool.error_text = typeof output.value === "string" ? output.value : JSON.stringify(output.value);
  } else if (output.type === "execution-denied") {
    tool.state = "output-denied";
  } else {
    tool.state = "output-available";
    tool.output = output.value ?? null;
  }
}
