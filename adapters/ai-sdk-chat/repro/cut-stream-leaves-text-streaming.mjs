// A response whose stream breaks off mid-text (the provider's connection
// drops) ends the request with an error, and the assistant message keeps
// its text part in state `streaming`: nothing will ever stream into it,
// nothing retries, and anything that renders or stores the message (a
// typing indicator, `onFinish` persistence) shows an answer still being
// written.
//
// Run: node adapters/ai-sdk-chat/repro/cut-stream-leaves-text-streaming.mjs
// Uses only the published `ai` package. Exits 1 while the bug shows, 0 once fixed.

import { AbstractChat, DirectChatTransport, ToolLoopAgent } from "ai";
import { MockLanguageModelV4 } from "ai/test";

let calls = 0;
const model = new MockLanguageModelV4({
  doStream: async () => {
    calls += 1;
    const stream = new ReadableStream({
      start(controller) {
        controller.enqueue({ type: "stream-start", warnings: [] });
        controller.enqueue({ type: "text-start", id: "t" });
        controller.enqueue({ type: "text-delta", id: "t", delta: "The answer is" });
        // The connection drops a moment later: no text-end, no finish.
        setTimeout(() => controller.error(new Error("socket hang up")), 10);
      },
    });
    return { stream };
  },
});

class State {
  status = "ready";
  error = undefined;
  messages = [];
  pushMessage = (message) => (this.messages = [...this.messages, structuredClone(message)]);
  popMessage = () => (this.messages = this.messages.slice(0, -1));
  replaceMessage = (index, message) => (this.messages = this.messages.with(index, structuredClone(message)));
  snapshot = (thing) => structuredClone(thing);
}
class Chat extends AbstractChat {}

let finished;
const chat = new Chat({
  state: new State(),
  transport: new DirectChatTransport({ agent: new ToolLoopAgent({ model }) }),
  onFinish: (event) => (finished = event),
});

await chat.sendMessage({ text: "What is the answer?" });
await new Promise((resolve) => setTimeout(resolve, 50));
const text = chat.messages.at(-1).parts.find((part) => part.type === "text");
console.log(`status: ${chat.status}; model calls: ${calls}; error: ${chat.error?.message}`);
console.log(`onFinish: isError=${finished?.isError} finishReason=${finished?.finishReason}; its text part: ${JSON.stringify(finished?.message.parts.find((p) => p.type === "text"))}`);
console.log(`last message's text part: ${JSON.stringify(text)}`);

if (text?.state === "streaming") {
  console.log("BUG: the request is over, and its text part is still `streaming`");
  process.exit(1);
}
console.log("ok: no part is left streaming");
