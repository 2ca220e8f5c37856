// CPU per `streamText` call of the pinned `ai` package with no SDK and no
// harness: a bare model streams one text of 25 deltas, read as the UI
// message stream the Node engines read. What one model call costs any
// engine that streams through `streamText` on this Node, to set beside
// the Node floor's whole run (`turnsim bench`).
//
//   node tests/bench-stream-text.mjs [calls]

import { streamText } from "ai";

const DELTAS = 25;

const model = {
  specificationVersion: "v4",
  provider: "bare",
  modelId: "bare",
  supportedUrls: {},
  async doGenerate() {
    throw new Error("streams only");
  },
  async doStream() {
    const stream = new ReadableStream({
      start(controller) {
        controller.enqueue({ type: "stream-start", warnings: [] });
        controller.enqueue({ type: "text-start", id: "t1" });
        for (let at = 0; at < DELTAS; at++) controller.enqueue({ type: "text-delta", id: "t1", delta: "word " });
        controller.enqueue({ type: "text-end", id: "t1" });
        const usage = { inputTokens: { total: 1 }, outputTokens: { total: 1 } };
        controller.enqueue({ type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage });
        controller.close();
      },
    });
    return { stream };
  },
};

async function oneCall() {
  const result = streamText({ model, messages: [{ role: "user", content: "hi" }] });
  let chunks = 0;
  for await (const _chunk of result.toUIMessageStream()) chunks++;
  return chunks;
}

const calls = Number(process.argv[2] ?? 300);
for (let warm = 0; warm < 50; warm++) await oneCall();
const started = process.cpuUsage();
let chunks = 0;
for (let call = 0; call < calls; call++) chunks = await oneCall();
const used = process.cpuUsage(started);
if (chunks < DELTAS) throw new Error(`the UI stream carried ${chunks} chunks, fewer than the model's ${DELTAS} deltas`);
const ms = (used.user + used.system) / 1000 / calls;
console.log(`${ms.toFixed(2)} ms of CPU per streamText call (${chunks} UI chunks), ${calls} calls, Node ${process.version}`);
