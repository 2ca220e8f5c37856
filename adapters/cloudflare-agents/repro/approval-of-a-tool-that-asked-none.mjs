// An approval sent for a client tool call that never asked for one (no
// `needsApproval`) moves the call to `approval-responded`, and the next
// inference fails before it reaches the model.
//
// `toolApprovalUpdate` (agents/chat) matches a part in `input-available`
// as well as `approval-requested`; the part has no approval, so the
// approval id falls back to the tool call id. `convertToModelMessages`
// then puts a tool-approval request/response pair in the prompt, and no
// tool result: the AI SDK refuses the prompt (`MissingToolResultsError`)
// and the continuation @cloudflare/think 0.23.0 starts for the approval
// (`tool-approval` with `autoContinue`) errors. The call stays
// `approval-responded` until something else answers it.
//
// Run: node adapters/cloudflare-agents/repro/approval-of-a-tool-that-asked-none.mjs
// (from the turnsim repository, after `npm ci --prefix adapters`).
// Uses only the published `agents` and `ai` packages. Exits 1 while the
// bug shows, 0 once fixed.

import { applyToolUpdate, toolApprovalUpdate } from "agents/chat";
import { convertToModelMessages, jsonSchema, streamText, tool } from "ai";
import { MockLanguageModelV4, convertArrayToReadableStream } from "ai/test";

// A client tool: no `execute`, no `needsApproval`.
const tools = { client_action: tool({ inputSchema: jsonSchema({ type: "object" }) }) };
const messages = [
  { id: "u1", role: "user", parts: [{ type: "text", text: "do the thing" }] },
  { id: "a1", role: "assistant", parts: [{ type: "step-start" }, { type: "tool-client_action", toolCallId: "call-1", state: "input-available", input: {} }] },
];

const found = applyToolUpdate(messages[1].parts, toolApprovalUpdate("call-1", true));
console.log(`the approval matched: ${found !== null}; the part is now ${JSON.stringify(found?.parts[found.index])}`);
if (found) messages[1].parts = found.parts;

let modelCalled = false;
const model = new MockLanguageModelV4({
  doStream: async () => {
    modelCalled = true;
    const usage = { inputTokens: { total: 1 }, outputTokens: { total: 1 } };
    return {
      stream: convertArrayToReadableStream([
        { type: "stream-start", warnings: [] },
        { type: "text-start", id: "t" },
        { type: "text-delta", id: "t", delta: "Done." },
        { type: "text-end", id: "t" },
        { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage },
      ]),
    };
  },
});

let failure = null;
try {
  const prompt = await convertToModelMessages(messages, { tools, ignoreIncompleteToolCalls: true });
  const result = streamText({ model, messages: prompt, tools, onError: ({ error }) => (failure ??= error) });
  await result.consumeStream();
} catch (error) {
  failure = error;
}
console.log(`the continuation: model called ${modelCalled}; error ${failure ? `${failure.name}: ${failure.message}` : "none"}`);

if (found && !modelCalled) {
  console.log("BUG: an approval of a call that asked for none left a prompt the AI SDK refuses; the continuation never reaches the model");
  process.exit(1);
}
console.log("ok: the approval is refused or the continuation runs");
