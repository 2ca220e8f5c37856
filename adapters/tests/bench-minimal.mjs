// Runs/second of the minimal example engine under the fake harness: each
// run is one process (init, a connection, a user message, a five-chunk
// answer, stdin closed), as one turnsim seed without eviction is.
//
//   node tests/bench-minimal.mjs [runs]

import { fileURLToPath } from "node:url";
import { FakeHarness, textChunks } from "./fake-harness.mjs";

const MINIMAL = ["node", fileURLToPath(new URL("../node/examples/minimal.mjs", import.meta.url))];

async function oneRun(seed) {
  const harness = new FakeHarness(MINIMAL);
  await harness.init({ seed });
  await harness.input({ type: "connect", connection: 1 });
  await harness.input({ type: "user_message", text: "say hello", options: { stall_timeout_ms: null } });
  for (const chunk of textChunks("t1", ["Hello, ", "world."])) {
    harness.nowNs += 10_000_000;
    await harness.input({ type: "model_chunk", call: 1, chunk });
  }
  await harness.input({ type: "model_end", call: 1, end: { kind: "closed" } });
  await harness.close();
  const stored = harness.store.messages.at(-1)?.parts.find((part) => part.type === "text")?.text;
  if (stored !== "Hello, world.") throw new Error(`run ${seed} stored ${JSON.stringify(stored)}`);
}

const runs = Number(process.argv[2] ?? 50);
const started = process.hrtime.bigint();
for (let seed = 0; seed < runs; seed++) await oneRun(seed);
const seconds = Number(process.hrtime.bigint() - started) / 1e9;
console.log(`${runs} runs in ${seconds.toFixed(2)} s: ${(runs / seconds).toFixed(1)} runs/s (one process a run, sequential)`);
