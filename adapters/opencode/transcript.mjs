// opencode's stored transcript in the history's vocabulary. opencode
// stores one assistant message per model step, each pointing at the user
// message it answers (`parentID`), with `step-start`, `text`, `reasoning`,
// `tool` and `step-finish` parts. The protocol's vocabulary is the UI
// message's: one assistant message a reply, a `step-start` per step. So the
// assistant messages answering one user message, in a row, are one
// protocol message named after the first one (`names.mjs`), their parts
// in order.
//
// | opencode | protocol |
// |---|---|
// | user `text` parts (not `synthetic`) | one `text` part each (a user message with none yet, written before its parts, is left out) |
// | `step-start` | `step-start` |
// | `text` / `reasoning`, `time.end` set | `done`; without it `streaming` |
// | `tool` `pending` | `input-streaming` (the raw input so far) |
// | `tool` `running` | `input-available` |
// | `tool` `completed` | `output-available`, the output as the tool's caller returned it (see `outputs`) |
// | `tool` `error` | `output-error` with its error text |
// | `step-finish`, `patch`, `snapshot`, `file`, `agent`, ... | nothing (bookkeeping, not conversation) |

/**
 * `messages`: `GET /session/:id/message`'s answer. `outputs(callId, text)`
 * gives a completed tool's output as the protocol value its result carried
 * (a server tool's output goes to opencode as text).
 */
export function protocolTranscript(messages, { outputs = (_callId, text) => text, names }) {
  const transcript = [];
  for (const { info, parts } of messages) {
    if (info.role === "user") {
      // A user message is written before its parts: until its text is, it is not in yet.
      const text = userParts(parts);
      if (text.length > 0) transcript.push({ id: names.user(info.id).message, role: "user", parts: text });
      continue;
    }
    const last = transcript[transcript.length - 1];
    const converted = parts.flatMap((part) => assistantPart(part, outputs));
    if (last && last.role === "assistant" && last.parent === info.parentID) last.parts.push(...converted);
    else transcript.push({ id: names.reply(info.id), role: "assistant", parent: info.parentID, parts: converted });
  }
  return transcript.map(({ parent: _parent, ...message }) => message);
}

function userParts(parts) {
  return parts.filter((part) => part.type === "text" && !part.synthetic && !part.ignored).map((part) => ({ type: "text", id: part.id, text: part.text ?? "", state: "done" }));
}

function assistantPart(part, outputs) {
  switch (part.type) {
    case "step-start":
      return [{ type: "step-start" }];
    case "text":
    case "reasoning":
      return [{ type: part.type, id: part.id, text: part.text ?? "", state: part.time?.end ? "done" : "streaming" }];
    case "tool":
      return [toolPart(part, outputs)];
    default:
      return [];
  }
}

function toolPart(part, outputs) {
  const state = part.state ?? {};
  const tool = { type: "tool", call_id: part.callID, tool_name: part.tool, state: "input-streaming", input_text: "", input: null, output: null, error_text: null, approval: null, repaired: false };
  if (state.status === "pending") {
    tool.input_text = typeof state.raw === "string" ? state.raw : "";
    return tool;
  }
  tool.input = state.input ?? {};
  tool.input_text = JSON.stringify(tool.input);
  if (state.status === "running") tool.state = "input-available";
  if (state.status === "completed") {
    tool.state = "output-available";
    tool.output = outputs(part.callID, state.output ?? "");
  }
  if (state.status === "error") {
    tool.state = "output-error";
    tool.error_text = state.error ?? null;
  }
  return tool;
}

/** The text a server tool hands opencode for a protocol outcome's output. */
export function outputText(output) {
  return typeof output === "string" ? output : JSON.stringify(output ?? null);
}
