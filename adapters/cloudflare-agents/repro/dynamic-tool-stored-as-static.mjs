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
// Uses only the published `agents` and `ai` packages; Think documents
// runtime-registered tools (its docs/lifecycle-hooks.md:616). Prints the
// contract it breaks and exits 1 while the bug shows, 0 once fixed.

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
  console.log(
    'contract: ai 7.0.173 docs/04-ai-sdk-ui/03-chatbot-tool-usage.mdx:609: "When using dynamic tools (tools with unknown types at compile time), the UI parts use a generic `dynamic-tool` type instead of specific tool types"; ' +
      'agents 0.32.0 dist/chat/index.d.ts:144-149 (applyChunkToParts): "Applies a stream chunk to a mutable parts array, building up the message incrementally. ... Handles all common chunk types that both server and client need"',
  );
  process.exit(1);
}
console.log("ok: stored as streamed");
