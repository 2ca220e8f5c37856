// After a continuation fails (the provider answers 503), a duplicate of the
// tool result it continued (a client retrying its send) starts the
// continuation again: `addToolOutput` overwrites the answered call and asks
// `sendAutomaticallyWhen`, and the chat's `error` status does not stop it.
// A retry is then decided by whether some client repeated a result, not by
// the application.
//
// Run: node adapters/ai-sdk-chat/repro/duplicate-result-refires-failed-continuation.mjs
// Uses only the published `ai` package. Exits 1 while the bug shows, 0 once fixed.

import {
  AbstractChat,
  APICallError,
  DirectChatTransport,
  ToolLoopAgent,
  jsonSchema,
  lastAssistantMessageIsCompleteWithToolCalls,
  tool,
} from "ai";
import { MockLanguageModelV4, convertArrayToReadableStream } from "ai/test";
import { State, usage } from "./chat-state.mjs";

const toolCall = [
  { type: "stream-start", warnings: [] },
  { type: "tool-call", toolCallId: "call-1", toolName: "lookup", input: "{}" },
  { type: "finish", finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage },
];
let calls = 0;
const model = new MockLanguageModelV4({
  doStream: async () => {
    calls += 1;
    if (calls === 1) return { stream: convertArrayToReadableStream(toolCall) };
    throw new APICallError({ message: "Service Unavailable", url: "mock://", requestBodyValues: {}, statusCode: 503, isRetryable: false });
  },
});
const tools = { lookup: tool({ inputSchema: jsonSchema({ type: "object" }) }) };

class Chat extends AbstractChat {}

const chat = new Chat({
  state: new State(),
  transport: new DirectChatTransport({ agent: new ToolLoopAgent({ model, tools, maxRetries: 0 }), onError: (error) => error.message }),
  sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
  onError: () => {},
});
const settle = () => new Promise((resolve) => setTimeout(resolve, 50));

await chat.sendMessage({ text: "How many meetings do I have?" });
await chat.addToolOutput({ tool: "lookup", toolCallId: "call-1", output: "3 meetings" });
await settle();
console.log(`after the result: model calls ${calls}, status ${chat.status} (${chat.error?.message})`);
const failed = calls;

// The client sends the same result again.
await chat.addToolOutput({ tool: "lookup", toolCallId: "call-1", output: "3 meetings" });
await settle();
console.log(`after the same result again: model calls ${calls}, status ${chat.status}`);

if (calls > failed) {
  console.log("BUG: a duplicate result started the failed continuation again");
  process.exit(1);
}
console.log("ok: a duplicate result does not start a continuation");
