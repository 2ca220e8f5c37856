// With `experimental_queue`, a message sent while "the assistant waits for
// a tool result or approval" is held until that wait ends. A step that
// ends while a tool call's input is still streaming (the provider finished
// the step mid-input: no `tool-call` ever came) leaves the part
// `input-streaming`, and the queue counts that as waiting for the user:
// no client can answer a call that has no input, so every later message
// waits for good, unsent and unanswered.
//
// Run: node adapters/ai-sdk-chat/repro/queue-waits-on-a-half-streamed-call.mjs
// Uses only the published `ai` package. Exits 1 while the bug shows, 0 once fixed.

import { AbstractChat, DirectChatTransport, ToolLoopAgent, jsonSchema, tool } from "ai";
import { MockLanguageModelV4, convertArrayToReadableStream } from "ai/test";
import { State, usage } from "./chat-state.mjs";

const finish = (unified) => ({ type: "finish", finishReason: { unified, raw: unified }, usage });
const calls = [
  // The step ends with the call's input half streamed.
  [
    { type: "text-start", id: "t" },
    { type: "text-delta", id: "t", delta: "Let me look." },
    { type: "text-end", id: "t" },
    { type: "tool-input-start", id: "call-1", toolName: "lookup" },
    { type: "tool-input-delta", id: "call-1", delta: '{"table": "us' },
    finish("tool-calls"),
  ],
  [{ type: "text-start", id: "t" }, { type: "text-delta", id: "t", delta: "That lookup was cut off." }, { type: "text-end", id: "t" }, finish("stop")],
];
const model = new MockLanguageModelV4({
  doStream: async () => ({
    stream: convertArrayToReadableStream([{ type: "stream-start", warnings: [] }, ...calls[model.doStreamCalls.length - 1]]),
  }),
});
const tools = { lookup: tool({ inputSchema: jsonSchema({ type: "object" }) }) };

class Chat extends AbstractChat {}

const chat = new Chat({
  state: new State(),
  transport: new DirectChatTransport({ agent: new ToolLoopAgent({ model, tools }) }),
  experimental_queue: true,
  onError: () => {},
});

await chat.sendMessage({ text: "Look it up." });
const part = chat.messages.at(-1).parts.find((p) => p.toolCallId === "call-1");
console.log(`after the first answer: status ${chat.status}; call-1 is ${part?.state}`);
await chat.sendMessage({ text: "And?" });
await new Promise((resolve) => setTimeout(resolve, 50));
console.log(`after "And?": model calls ${model.doStreamCalls.length}; queued ${chat.experimental_queuedMessages.length}; messages ${chat.messages.length}`);

if (chat.experimental_queuedMessages.length > 0 && model.doStreamCalls.length === 1) {
  console.log("BUG: the message waits in the queue behind a call no client can answer");
  process.exit(1);
}
console.log("ok: the message was sent");
