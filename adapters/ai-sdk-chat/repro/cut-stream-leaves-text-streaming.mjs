// A response whose stream breaks off mid-text (the provider's connection
// drops) ends the request with an error, and the assistant message keeps
// its text part in state `streaming`: nothing will ever stream into it,
// nothing retries, and anything that renders or stores the message (a
// typing indicator, `onFinish` persistence) shows an answer still being
// written. When the text followed a client tool call, the part also blocks
// that call's continuation for good: the result the client adds later is
// never sent (`lastAssistantMessageIsCompleteWithToolCalls` refuses a step
// whose text after the last tool call is not `done`).
//
// Run: node adapters/ai-sdk-chat/repro/cut-stream-leaves-text-streaming.mjs
// Uses only the published `ai` package. Exits 1 while the bug shows, 0 once fixed.

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

/** A provider stream that sends `parts`, then drops the connection a moment later (no text-end, no finish). */
function cutAfter(parts) {
  return new ReadableStream({
    start(controller) {
      controller.enqueue({ type: "stream-start", warnings: [] });
      for (const part of parts) controller.enqueue(part);
      setTimeout(() => controller.error(new Error("socket hang up")), 10);
    },
  });
}
const answer = [
  { type: "stream-start", warnings: [] },
  { type: "text-start", id: "a" },
  { type: "text-delta", id: "a", delta: "Booked." },
  { type: "text-end", id: "a" },
  { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage },
];

class Chat extends AbstractChat {}
const settle = () => new Promise((resolve) => setTimeout(resolve, 50));
const tools = { askUser: tool({ inputSchema: jsonSchema({ type: "object" }) }) };

// 1. A plain answer cut mid-text.
const plainModel = new MockLanguageModelV4({
  doStream: async () => ({ stream: cutAfter([{ type: "text-start", id: "t" }, { type: "text-delta", id: "t", delta: "The answer is" }]) }),
});
const plain = new Chat({
  state: new State(),
  transport: new DirectChatTransport({ agent: new ToolLoopAgent({ model: plainModel }), onError: (error) => error.message }),
  onError: () => {},
});
await plain.sendMessage({ text: "What is the answer?" });
await settle();
const text = plain.messages.at(-1).parts.find((part) => part.type === "text");
console.log(`1. status: ${plain.status} (${plain.error?.message}); model calls: ${plainModel.doStreamCalls.length}; text part: ${JSON.stringify(text)}`);

// 2. A client tool call, then text, then the cut; the client answers the call afterwards.
const toolModel = new MockLanguageModelV4({
  doStream: async () =>
    toolModel.doStreamCalls.length === 1
      ? {
          stream: cutAfter([
            { type: "tool-call", toolCallId: "call-1", toolName: "askUser", input: "{}" },
            { type: "text-start", id: "t" },
            { type: "text-delta", id: "t", delta: "Waiting for your choice" },
          ]),
        }
      : { stream: convertArrayToReadableStream(answer) },
});
const withTool = new Chat({
  state: new State(),
  transport: new DirectChatTransport({ agent: new ToolLoopAgent({ model: toolModel, tools }), onError: (error) => error.message }),
  sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
  onError: () => {},
});
await withTool.sendMessage({ text: "Book my meeting." });
await settle();
await withTool.addToolOutput({ tool: "askUser", toolCallId: "call-1", output: "the 3pm one" });
await settle();
const parts = withTool.messages.at(-1).parts.map((part) => `${part.type}:${part.state ?? ""}`).join(", ");
console.log(`2. after the client's answer: model calls ${toolModel.doStreamCalls.length}; parts: ${parts}`);

const plainBug = text?.state === "streaming";
const toolBug = toolModel.doStreamCalls.length === 1;
if (plainBug) console.log("BUG: the request is over, and its text part is still `streaming`");
if (toolBug) console.log("BUG: the streaming part left by the cut keeps the answered tool call from ever being continued");
if (plainBug || toolBug) process.exit(1);
console.log("ok: no part is left streaming, and the answered call is continued");
