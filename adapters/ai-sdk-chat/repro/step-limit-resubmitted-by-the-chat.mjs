// A server whose tool loop stops at its step limit (`stopWhen:
// stepCountIs(n)`, here through `ToolLoopAgent`) ends on a step whose tool
// calls all have results: they are the server's own tools, executed by
// `streamText`. `lastAssistantMessageIsCompleteWithToolCalls`, the
// continuation predicate the docs give for client tools, counts them as a
// batch the client completed, so the chat sends the conversation again and
// the server runs another `n` steps: the limit bounds nothing. (The same
// happens when the step after a server tool streams nothing: the chat's
// last step is still the tool step.)
//
// Run: node adapters/ai-sdk-chat/repro/step-limit-resubmitted-by-the-chat.mjs
// Uses only the published `ai` package. Exits 1 while the bug shows, 0 once fixed.

import {
  AbstractChat,
  DirectChatTransport,
  ToolLoopAgent,
  jsonSchema,
  lastAssistantMessageIsCompleteWithToolCalls,
  stepCountIs,
  tool,
} from "ai";
import { MockLanguageModelV4, convertArrayToReadableStream } from "ai/test";
import { State, usage } from "./chat-state.mjs";

const STEP_LIMIT = 2;
const CALLS_MAX = 8;
// A model that keeps calling the server tool (each call a new page), then answers after CALLS_MAX calls.
const model = new MockLanguageModelV4({
  doStream: async () => {
    const n = model.doStreamCalls.length;
    if (n > CALLS_MAX) {
      // The repro's budget is spent: the model answers, which ends the loop.
      const answer = [{ type: "text-start", id: "t" }, { type: "text-delta", id: "t", delta: "Done." }, { type: "text-end", id: "t" }];
      const finish = { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage };
      return { stream: convertArrayToReadableStream([{ type: "stream-start", warnings: [] }, ...answer, finish]) };
    }
    return {
      stream: convertArrayToReadableStream([
        { type: "stream-start", warnings: [] },
        { type: "tool-call", toolCallId: `call-${n}`, toolName: "readPage", input: JSON.stringify({ page: n }) },
        { type: "finish", finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage },
      ]),
    };
  },
});
const tools = {
  readPage: tool({ inputSchema: jsonSchema({ type: "object" }), execute: async ({ page }) => `page ${page}` }),
};

class Chat extends AbstractChat {}

let requests = 0;
const agent = new ToolLoopAgent({ model, tools, stopWhen: stepCountIs(STEP_LIMIT) });
const direct = new DirectChatTransport({ agent, onError: (error) => error.message });
const transport = {
  sendMessages: (options) => {
    requests += 1;
    return direct.sendMessages(options);
  },
  reconnectToStream: async () => null,
};
const chat = new Chat({ state: new State(), transport, sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls, onError: () => {} });

await chat.sendMessage({ text: "Read every page." });
await new Promise((resolve) => setTimeout(resolve, 200));
console.log(`step limit ${STEP_LIMIT}: ${requests} request(s) sent by the chat, ${model.doStreamCalls.length} model calls`);

if (model.doStreamCalls.length > STEP_LIMIT) {
  console.log("BUG: the chat resubmitted a step of server tool results, and the step limit bounded nothing");
  process.exit(1);
}
console.log("ok: the step limit ends the loop");
