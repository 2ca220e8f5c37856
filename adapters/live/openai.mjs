// What the model was shown, in the history's vocabulary: an OpenAI chat
// completions request body (`messages`) translated to the protocol's
// messages (`Message` JSON: a user message with one text part; an
// assistant message with a `step-start` per model step, its reasoning, text
// and tool parts), tied to the stored transcript's ids so the oracle can
// find in the store what each request showed.
//
// - System messages are the engine's prompt, not the conversation: left out.
// - Each user message is one user message. It takes the id of the next
//   stored user message with the same text (in order), or a made-up one
//   (`request-user-N`) when the store shows none.
// - The assistant messages (and the `tool` messages answering their calls)
//   between two user messages are one assistant message, a step each: the
//   one stored right after that user message gives its id.
// - A tool call answered by a `tool` message is `output-available` (or
//   `output-error` when the stored part says so) with the stored part's
//   output when the store holds one for that call, the answer's text
//   otherwise; a call with no answer is `input-available`.
// - An assistant message on the wire is one step: its reasoning, its text
//   (`content`) and its calls (`tool_calls`), with no order between them.
//   The order is the stored step's (the same step of the reply), when it
//   holds each of them; otherwise reasoning, text, calls. The translation
//   never orders a step otherwise than the engine stored it: where the
//   wire cannot say, the store is the only account of the order.

/**
 * `body`: the request's JSON; `stored`: the engine's transcript as protocol
 * messages. The last message is the reply the request writes into, with a
 * `step-start` for the step it asks for (as the built-in engine shows
 * it): the assistant message the request ends with, or, when it ends with
 * a user message, the assistant message stored after that one (an engine
 * that stores its reply before asking the model), if there is one.
 */
export function requestMessages(body, stored, { toolName = (name) => name } = {}) {
  const storedTools = toolParts(stored);
  const turns = [];
  for (const message of body.messages ?? []) {
    if (message.role === "user") turns.push({ role: "user", text: textOf(message.content) });
    else if (message.role === "assistant") assistantStep(turns, message, toolName);
    else if (message.role === "tool") toolAnswer(turns, message, storedTools);
  }
  const messages = tie(turns, stored);
  openReply(messages, stored);
  return messages;
}

function openReply(messages, stored) {
  const last = messages[messages.length - 1];
  if (last?.role === "assistant") {
    last.parts.push({ type: "step-start" });
    return;
  }
  const at = last ? stored.findIndex((message) => message.id === last.id) : -1;
  const reply = at >= 0 ? stored[at + 1] : undefined;
  if (reply?.role === "assistant") messages.push({ id: reply.id, role: "assistant", parts: [{ type: "step-start" }] });
}

function assistantStep(turns, message, toolName) {
  let last = turns[turns.length - 1];
  if (!last || last.role !== "assistant") {
    last = { role: "assistant", parts: [] };
    turns.push(last);
  }
  last.parts.push({ type: "step-start" });
  const reasoning = message.reasoning_content ?? message.reasoning;
  if (typeof reasoning === "string" && reasoning.length > 0) last.parts.push({ type: "reasoning", id: "", text: reasoning, state: "done" });
  const text = textOf(message.content);
  if (text.length > 0) last.parts.push({ type: "text", id: "", text, state: "done" });
  for (const call of message.tool_calls ?? []) {
    const inputText = call.function?.arguments ?? "";
    last.parts.push({
      type: "tool",
      call_id: call.id,
      tool_name: toolName(call.function?.name ?? ""),
      state: "input-available",
      input_text: inputText,
      input: parseJson(inputText),
      output: null,
      error_text: null,
      approval: null,
      repaired: false,
    });
  }
}

function toolAnswer(turns, message, storedTools) {
  const last = turns[turns.length - 1];
  const part = last?.role === "assistant" ? last.parts.find((candidate) => candidate.type === "tool" && candidate.call_id === message.tool_call_id) : undefined;
  if (!part) return;
  const stored = storedTools.get(part.call_id);
  if (stored && (stored.state === "output-available" || stored.state === "output-error" || stored.state === "output-denied")) {
    part.state = stored.state;
    part.output = stored.output;
    part.error_text = stored.error_text;
    part.approval = stored.approval;
    return;
  }
  part.state = "output-available";
  part.output = textOf(message.content);
}

/** Gives each turn the stored message's id (and part ids) it stands for. */
function tie(turns, stored) {
  const messages = [];
  let storedAt = 0;
  let lastUser = -1;
  let userCount = 0;
  for (const turn of turns) {
    if (turn.role === "user") {
      userCount += 1;
      const at = stored.findIndex((message, index) => index >= storedAt && message.role === "user" && storedText(message) === turn.text);
      lastUser = at;
      if (at >= 0) storedAt = at + 1;
      const id = at >= 0 ? stored[at].id : `request-user-${userCount}`;
      const parts = at >= 0 ? stored[at].parts : [{ type: "text", id: "user", text: turn.text, state: "done" }];
      messages.push({ id, role: "user", parts });
      continue;
    }
    const reply = lastUser >= 0 && stored[lastUser + 1]?.role === "assistant" ? stored[lastUser + 1] : null;
    const parts = reply ? orderedAsStored(turn.parts, reply.parts) : turn.parts;
    messages.push({ id: reply ? reply.id : `request-reply-${userCount}`, role: "assistant", parts: tiePartIds(parts, reply) });
  }
  return messages;
}

/**
 * The request's steps, each in its stored step's order (the n-th step of
 * the stored reply) when that step holds every part the request's step
 * shows; else as read from the wire.
 */
function orderedAsStored(parts, storedParts) {
  const storedSteps = steps(storedParts);
  return steps(parts).flatMap((step, n) => {
    const stored = storedSteps[n] ?? [];
    const places = [];
    for (const part of step) {
      const at = part.type === "step-start" ? -1 : stored.findIndex((candidate, index) => !places.includes(index) && sameSlot(candidate, part));
      if (part.type !== "step-start" && at < 0) return step;
      places.push(at);
    }
    return step.map((part, index) => ({ part, at: places[index] })).sort((a, b) => a.at - b.at).map(({ part }) => part);
  });
}

/** Parts split at each `step-start` (which opens its step). */
function steps(parts) {
  const split = [];
  for (const part of parts) {
    if (part.type === "step-start" || split.length === 0) split.push([]);
    split[split.length - 1].push(part);
  }
  return split;
}

/** Whether a stored part is the one a request's part shows: the same call, or the same text. */
function sameSlot(stored, shown) {
  if (stored.type !== shown.type) return false;
  return shown.type === "tool" ? stored.call_id === shown.call_id : stored.text === shown.text;
}

/** Text and reasoning parts take the stored reply's part ids, in order. */
function tiePartIds(parts, reply) {
  if (!reply) return parts.map((part, index) => (part.id === "" ? { ...part, id: `part-${index}` } : part));
  const storedIds = { text: [], reasoning: [] };
  for (const part of reply.parts) if (part.type in storedIds) storedIds[part.type].push(part.id);
  const used = { text: 0, reasoning: 0 };
  return parts.map((part, index) => {
    if (!(part.type in used)) return part;
    const id = storedIds[part.type][used[part.type]++] ?? `part-${index}`;
    return { ...part, id };
  });
}

function toolParts(stored) {
  const tools = new Map();
  for (const message of stored) for (const part of message.parts) if (part.type === "tool") tools.set(part.call_id, part);
  return tools;
}

function storedText(message) {
  return message.parts
    .filter((part) => part.type === "text")
    .map((part) => part.text)
    .join("");
}

/** The text of an OpenAI `content`: a string, or the text parts of an array. */
export function textOf(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((part) => part?.type === "text")
    .map((part) => part.text ?? "")
    .join("");
}

function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
