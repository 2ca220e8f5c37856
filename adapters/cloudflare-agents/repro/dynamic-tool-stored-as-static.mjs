// A call of an app's own `dynamicTool` (a tool defined at run time, whose
// stream chunks say `dynamic: true`) is shown to an AI SDK client as a
// `dynamic-tool` part, but the message @cloudflare/think 0.23.0 stores is
// built by agents' `StreamAccumulator` (`applyChunkToParts`), which makes
// every `tool-input-start` a `tool-<name>` part and ignores `dynamic`. A
// client that reloads is shown a different part than it streamed.
// (Think's MCP tools are not affected: it wraps them as static tools.)
//
// Run: node adapters/cloudflare-agents/repro/dynamic-tool-stored-as-static.mjs
// (from the turnsim repository, after `npm ci --prefix adapters`).
// Uses only the published `agents` and `ai` packages. Exits 1 while the
// bug shows, 0 once fixed.

import { StreamAccumulator } from "agents/chat";
import { dynamicTool, jsonSchema, readUIMessageStream, stepCountIs, streamText } from "ai";
import { MockLanguageModelV4, convertArrayToReadableStream } from "ai/test";

const usage = { inputTokens: { total: 1 }, outputTokens: { total: 1 } };
const model = new MockLanguageModelV4({
  doStream: async () => ({
    stream: convertArrayToReadableStream([
      { type: "stream-start", warnings: [] },
      { type: "tool-call", toolCallId: "call-1", toolName: "search", input: "{}" },
      { type: "finish", finishReason: { unified: "tool-calls", raw: "tool-calls" }, usage },
    ]),
  }),
});
const tools = { search: dynamicTool({ inputSchema: jsonSchema({ type: "object" }), execute: async () => "found" }) };
const result = streamText({ model, tools, prompt: "search", stopWhen: stepCountIs(1) });

const [forClient, forStore] = result.toUIMessageStream().tee();
const accumulator = new StreamAccumulator({ messageId: "a1" });
const reader = forStore.getReader();
for (;;) {
  const { done, value } = await reader.read();
  if (done) break;
  accumulator.applyChunk(value);
}
let shown;
for await (const message of readUIMessageStream({ stream: forClient })) shown = message;

const clientPart = shown.parts.find((part) => part.toolCallId === "call-1");
const storedPart = accumulator.toMessage().parts.find((part) => part.toolCallId === "call-1");
console.log(`the client's stream reader shows: ${clientPart?.type}; the message Think stores has: ${storedPart?.type}`);

if (clientPart?.type !== storedPart?.type) {
  console.log("BUG: the stored message shows the dynamic tool's call as a static tool part");
  process.exit(1);
}
console.log("ok: stored as streamed");
