// With `experimental_queue`, a message sent while "the assistant waits for
// a tool result or approval" is held until that wait ends. A step the
// provider cuts at its output limit while a tool call's input is still
// streaming (`finish: length`, no `tool-call` ever came) leaves the part
// `input-streaming`, and the queue counts that as waiting for the user
// (`isWaitingForUser`). Nobody is asked for that call (`onToolCall` runs
// for a `tool-call`, which never came), so the queue waits for good: every
// later message stays unsent until the user presses "send now"
// (`experimental_sendQueuedMessageNow`).
//
// Run: node adapters/ai-sdk-chat/repro/queue-waits-on-a-half-streamed-call.mjs
// Uses only the published `ai` package, as its chatbot guide shows the
// queue. Prints the contract it breaks and exits 1 while the bug shows, 0
// once fixed.

import { AbstractChat, DirectChatTransport, ToolLoopAgent, jsonSchema, tool } from "ai";
import { MockLanguageModelV4, convertArrayToReadableStream } from "ai/test";
import { State, usage } from "./chat-state.mjs";

const finish = (unified) => ({ type: "finish", finishReason: { unified, raw: unified }, usage });
const calls = [
  // The provider hits its output limit with the call's input half streamed.
  [
    { type: "text-start", id: "t" },
    { type: "text-delta", id: "t", delta: "Let me look." },
    { type: "text-end", id: "t" },
    { type: "tool-input-start", id: "call-1", toolName: "lookup" },
    { type: "tool-input-delta", id: "call-1", delta: '{"table": "us' },
    finish("length"),
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
  console.log(
    'contract: ai 7.0.173 docs/04-ai-sdk-ui/02-chatbot.mdx:358: "messages sent while a response is in progress wait in `experimental_queuedMessages` and are sent one at a time after each response finishes"; ' +
      ':404: "The queue also waits while the assistant waits for the user, e.g. a tool call that needs an approval or a client-side tool result, and continues once the result is added"',
  );
  process.exit(1);
}
console.log("ok: the message was sent");
