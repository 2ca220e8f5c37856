// Runs/second of the minimal example engine under the fake harness. Each
// run is init, a connection, a user message, a five-chunk answer and the
// end of the call. By default every run gets its own process, as a run
// does when the engine does not offer `reinit`; with --reuse one process
// serves every run, one `init` after another.
//
//   node tests/bench-minimal.mjs [runs] [--reuse]

import { fileURLToPath } from "node:url";
import { FakeHarness, textChunks } from "./fake-harness.mjs";

const MINIMAL = ["node", fileURLToPath(new URL("../node/examples/minimal.mjs", import.meta.url))];

async function oneRun(harness, seed) {
  harness.nowNs = 0;
  await harness.init({ seed });
  await harness.input({ type: "connect", connection: 1 });
  await harness.input({ type: "user_message", text: "say hello", options: { stall_timeout_ms: null } });
  for (const chunk of textChunks("t1", ["Hello, ", "world."])) {
    harness.nowNs += 10_000_000;
    await harness.input({ type: "model_chunk", call: harness.nextCall, chunk });
  }
  await harness.input({ type: "model_end", call: harness.nextCall, end: { kind: "closed" } });
  const stored = harness.store.messages.at(-1)?.parts.find((part) => part.type === "text")?.text;
  if (stored !== "Hello, world.") throw new Error(`run ${seed} stored ${JSON.stringify(stored)}`);
}

const runs = Number(process.argv[2] ?? 50);
const reuse = process.argv.includes("--reuse");
const started = process.hrtime.bigint();
let shared = reuse ? new FakeHarness(MINIMAL) : null;
for (let seed = 0; seed < runs; seed++) {
  const harness = shared ?? new FakeHarness(MINIMAL);
  await oneRun(harness, seed);
  if (!shared) await harness.close();
}
if (shared) await shared.close();
const seconds = Number(process.hrtime.bigint() - started) / 1e9;
const how = reuse ? "one process for all runs" : "one process a run";
console.log(`${runs} runs in ${seconds.toFixed(2)} s: ${(runs / seconds).toFixed(1)} runs/s (${how}, sequential)`);
