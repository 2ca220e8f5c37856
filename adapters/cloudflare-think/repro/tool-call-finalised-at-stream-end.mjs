// The order behind the client-view failures where text is shown before a
// tool call the model finished first, standalone: no workerd, no Think.
// `@ai-sdk/openai-compatible` 3.0.92's stream (through `streamText` of
// `ai` 7.0.173, what Think calls) against a provider that streams one tool
// call whole, then text, then `tool_calls`. The call's `tool-call` (the
// part that makes it `input-available`) comes only after the provider's
// stream ends, behind the text: `@ai-sdk/provider-utils` 5.0.81,
// `src/streaming-tool-call-tracker.ts` 429-432, "Tool calls must not
// finalize before the stream ends ... Finalization happens in flush()".
//
//   node adapters/cloudflare-think/repro/tool-call-finalised-at-stream-end.mjs
//
// Prints the stream's parts in order; exits 1 while a text delta comes
// before the tool call the provider streamed first (the order the client
// sees), 0 if the call is finalised in the model's order.
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { jsonSchema, streamText, tool } from "ai";
import { startProvider } from "./provider.mjs";

const provider = await startProvider([
  [
    { call: { id: "tc-1", name: "lookup", input: { q: "weather" } } },
    { text: "Looking that up." },
    { finish: "tool_calls" }
  ]
]);
try {
  const model = createOpenAICompatible({ name: "mock", baseURL: `http://${provider.address}/v1` }).chatModel("m");
  const result = streamText({
    model,
    prompt: "What is the weather?",
    tools: { lookup: tool({ inputSchema: jsonSchema({ type: "object", properties: { q: { type: "string" } } }) }) }
  });
  const order = [];
  for await (const part of result.fullStream) {
    if (["tool-input-start", "tool-input-end", "tool-call", "text-start", "text-delta", "text-end"].includes(part.type)) {
      order.push(part.type);
    }
  }
  console.log(`provider streamed: tool call tc-1 (whole), then "Looking that up.", then finish`);
  console.log(`model stream parts: ${order.join(", ")}`);
  const reordered = order.indexOf("text-delta") >= 0 && order.indexOf("text-delta") < order.indexOf("tool-call");
  console.log(
    reordered
      ? "reproduced: the text reaches the stream before the call it followed is finalised"
      : "not reproduced: the call is finalised before the text that followed it"
  );
  process.exitCode = reordered ? 1 : 0;
} finally {
  await provider.close();
}
