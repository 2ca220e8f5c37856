// `streamText`'s stall timeout (`timeout: { chunkMs }`) aborts a provider
// stream that stops sending, and its UI message stream then ends with an
// `abort` chunk. The chat does not read `abort`: the request ends as if the
// answer were complete (status `ready`, `onFinish` with `isError: false`
// and `isAbort: false`, no `error`), and the half answer's text part stays
// `streaming`. An application cannot tell a stalled answer from a finished
// one, and `sendAutomaticallyWhen` is asked to continue after it.
//
// Run: node adapters/ai-sdk-chat/repro/stall-timeout-ends-as-finished.mjs
// Uses only the published `ai` package. Exits 1 while the bug shows, 0 once fixed.

import { AbstractChat, streamText } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { State } from "./chat-state.mjs";

// A provider that sends the start of an answer and then nothing, never closing the stream.
const model = new MockLanguageModelV4({
  doStream: async () => ({
    stream: new ReadableStream({
      start(controller) {
        controller.enqueue({ type: "stream-start", warnings: [] });
        controller.enqueue({ type: "text-start", id: "t" });
        controller.enqueue({ type: "text-delta", id: "t", delta: "The answer is" });
      },
    }),
  }),
});

// What a route handler does: streamText with a stall timeout, as a UI message stream.
const transport = {
  sendMessages: async ({ messages, abortSignal }) =>
    streamText({ model, prompt: messages.at(-1).parts[0].text, timeout: { chunkMs: 100 }, abortSignal }).toUIMessageStream(),
  reconnectToStream: async () => null,
};

class Chat extends AbstractChat {}

let finished;
let asked = 0;
const chat = new Chat({
  state: new State(),
  transport,
  onFinish: (event) => (finished = event),
  sendAutomaticallyWhen: () => {
    asked += 1;
    return false;
  },
});

await chat.sendMessage({ text: "What is the answer?" });
const text = chat.messages.at(-1).parts.find((part) => part.type === "text");
console.log(`status: ${chat.status}; error: ${chat.error?.message ?? "none"}`);
console.log(`onFinish: isError=${finished?.isError} isAbort=${finished?.isAbort} finishReason=${finished?.finishReason}`);
console.log(`text part: ${JSON.stringify(text)}; sendAutomaticallyWhen asked ${asked} time(s)`);

if (chat.status === "ready" && finished && !finished.isError && !finished.isAbort) {
  console.log("BUG: a stalled answer ended the request as a finished one");
  process.exit(1);
}
console.log("ok: the stall is reported");
