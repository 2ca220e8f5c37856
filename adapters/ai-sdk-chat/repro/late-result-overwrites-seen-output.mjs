// A tool result that arrives after the continuation already answered it
// (a duplicate from a client that retried, or a late one from a second
// tab) still replaces the tool's output: `addToolOutput` finds the part by
// its tool call id whatever its state. The chat then holds an output the
// model never saw, under an answer written from the first one.
//
// Run: node adapters/ai-sdk-chat/repro/late-result-overwrites-seen-output.mjs
// (from the turnsim repository, after `npm ci --prefix adapters`).
// Uses only the published `ai` package: `Chat` machinery (`AbstractChat`),
// `DirectChatTransport` over a `ToolLoopAgent`, and `MockLanguageModelV4`.
// Exits 1 while the bug shows, 0 once fixed.

import {
  AbstractChat,
  DirectChatTransport,
  ToolLoopAgent,
  jsonSchema,
  lastAssistantMessageIsCompleteWithToolCalls,
  tool,
} from "ai";
import { MockLanguageModelV4, convertArrayToReadableStream } from "ai/test";
import { State, usage } from "./chat-state.mjs";

const finish = (unified) => ({ type: "finish", finishReason: { unified, raw: unified }, usage });
const calls = [
  [{ type: "tool-call", toolCallId: "call-1", toolName: "lookup", input: "{}" }, finish("tool-calls")],
  [{ type: "text-start", id: "t" }, { type: "text-delta", id: "t", delta: "You have 3 meetings." }, { type: "text-end", id: "t" }, finish("stop")],
];
const prompts = [];
const model = new MockLanguageModelV4({
  doStream: async (options) => {
    prompts.push(options.prompt);
    return { stream: convertArrayToReadableStream([{ type: "stream-start", warnings: [] }, ...calls[prompts.length - 1]]) };
  },
});
// A client tool: no `execute`, the browser answers it.
const tools = { lookup: tool({ inputSchema: jsonSchema({ type: "object" }) }) };

class Chat extends AbstractChat {}

const chat = new Chat({
  state: new State(),
  transport: new DirectChatTransport({ agent: new ToolLoopAgent({ model, tools }) }),
  sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
});
const settle = () => new Promise((resolve) => setTimeout(resolve, 50));

await chat.sendMessage({ text: "How many meetings do I have?" });
await chat.addToolOutput({ tool: "lookup", toolCallId: "call-1", output: "3 meetings" });
await settle();
const seen = prompts[1]?.find((message) => message.role === "tool")?.content[0]?.output?.value;
console.log(`model calls: ${prompts.length}; the continuation was sent output ${JSON.stringify(seen)}`);

// The same result id again, after the answer was written.
await chat.addToolOutput({ tool: "lookup", toolCallId: "call-1", output: "0 meetings" });
await settle();
const part = chat.messages.at(-1).parts.find((p) => p.toolCallId === "call-1");
const text = chat.messages.at(-1).parts.filter((p) => p.type === "text").map((p) => p.text).join("");
console.log(`after a second result for call-1: part output ${JSON.stringify(part.output)}, answer "${text}", model calls: ${prompts.length}`);

if (part.output !== seen) {
  console.log("BUG: the chat now shows an output the model never saw, beside the answer written from another one");
  process.exit(1);
}
console.log("ok: the output the model saw is kept");
