// A chat loaded with stored messages whose last assistant step holds a
// complete tool batch (every call answered: the tab closed, or the server
// restarted, between the last result and the continuation) never sends the
// continuation: `sendAutomaticallyWhen` is consulted only when a stream
// ends or a result or approval is added, never for the messages a chat
// starts with. The same messages reached by `addToolOutput` continue at
// once. The conversation waits for a continuation nothing will send.
//
// Run: node adapters/ai-sdk-chat/repro/stored-complete-batch-never-continues.mjs
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

const answer = [
  { type: "stream-start", warnings: [] },
  { type: "text-start", id: "t" },
  { type: "text-delta", id: "t", delta: "You have 3 meetings." },
  { type: "text-end", id: "t" },
  { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage },
];
const tools = { lookup: tool({ inputSchema: jsonSchema({ type: "object" }) }) };

class Chat extends AbstractChat {}

/** A chat over `messages` with its own model; resolves to how many times the model was called. */
async function run(messages, act) {
  const model = new MockLanguageModelV4({ doStream: async () => ({ stream: convertArrayToReadableStream(answer) }) });
  const chat = new Chat({
    state: new State(messages),
    transport: new DirectChatTransport({ agent: new ToolLoopAgent({ model, tools }) }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
  });
  await act(chat);
  await new Promise((resolve) => setTimeout(resolve, 50));
  return model.doStreamCalls.length;
}

const user = { id: "u1", role: "user", parts: [{ type: "text", text: "How many meetings do I have?" }] };
const call = { type: "tool-lookup", toolCallId: "call-1", input: {} };
const waiting = { id: "a1", role: "assistant", parts: [{ type: "step-start" }, { ...call, state: "input-available" }] };
const answered = { id: "a1", role: "assistant", parts: [{ type: "step-start" }, { ...call, state: "output-available", output: "3 meetings" }] };

const viaResult = await run([user, waiting], (chat) =>
  chat.addToolOutput({ tool: "lookup", toolCallId: "call-1", output: "3 meetings" }),
);
const loaded = await run([user, answered], async () => {});
console.log(`result added to a waiting call: ${viaResult} model call(s)`);
console.log(`chat loaded with the same call already answered: ${loaded} model call(s)`);

if (loaded === 0 && viaResult === 1) {
  console.log("BUG: the loaded chat holds a complete batch and never continues it");
  process.exit(1);
}
console.log("ok: the loaded chat continues");
