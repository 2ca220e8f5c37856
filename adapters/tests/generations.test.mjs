// Generations in one process: after an eviction the harness may send the
// same process the next generation's `init` (when it declared
// `generations`). Nothing of the old generation may survive into the new
// one: not the engine's module state, not its globals, not its timers, not
// the work it left waiting; and the new generation must behave exactly as
// it would in a new process.

import { afterEach, test as nodeTest } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { readFileSync } from "node:fs";
import { FakeHarness, killAll } from "./fake-harness.mjs";
import { generationSeed } from "../node/random.mjs";

const test = (name, fn) => nodeTest(name, { timeout: 30_000 }, fn);
afterEach(killAll);

const ENGINE = ["node", fileURLToPath(new URL("./fixtures/generations/engine.mjs", import.meta.url))];
const posts = (messages) => messages.filter((message) => message.type === "post").map((message) => message.text);
const say = (harness, text) => harness.input({ type: "user_message", text, options: { stall_timeout_ms: null } });
const report = (messages) => JSON.parse(posts(messages)[0]);

test("an engine with a module of its own declares generations", async () => {
  const harness = new FakeHarness(ENGINE);
  assert.deepEqual(await harness.init({ seed: 3 }), [{ type: "idle", next_timer_ns: null, reinit: true, generations: true, batches: true }]);
  await harness.close();
});

test("nothing of a generation crosses into the next one in the same process", async () => {
  const harness = new FakeHarness(ENGINE);
  await harness.init({ seed: 3 });
  const first = report(await say(harness, "a"));
  assert.deepEqual(first, { generation: 1, seen: ["a"], loads: 1, timersFired: 0, globals: ["generationProbeLast"] });
  assert.equal((await say(harness, "timer")).at(-1).next_timer_ns, 1e9, "the old generation's timer is pending");
  const pending = await say(harness, "pending");
  assert.equal(pending.filter((message) => message.type === "server_tool").length, 1);

  // The eviction: the same process gets the next generation's init.
  harness.nowNs = 500e6;
  const booted = await harness.init({ seed: 3, generation: 2, state: harness.store });
  assert.deepEqual(booted, [{ type: "idle", next_timer_ns: null, reinit: true, generations: true, batches: true }], "the old timer is gone");
  // The old generation's server tool finishes: nobody is left to hear it.
  const late = await harness.input({ type: "server_tool_done", request_id: "r1", call_id: "tc-1", outcome: { Output: "x" } });
  assert.deepEqual(late, [{ type: "idle", next_timer_ns: null }], "late work of the old generation writes nothing");
  harness.nowNs = 2e9; // past the old timer's time
  const second = report(await say(harness, "b"));
  assert.deepEqual(second, { generation: 2, seen: ["b"], loads: 1, timersFired: 0, globals: ["generationProbeLast"] });
  await harness.close();
});

test("a generation started in place says what it says in a new process", async () => {
  const script = async (harness) => {
    const lines = [];
    for (const text of ["x", "timer", "y"]) lines.push(...(await say(harness, text)));
    harness.nowNs = 3e9;
    lines.push(...(await harness.timer(3e9)));
    lines.push(...(await say(harness, "z")));
    return lines;
  };
  const reused = new FakeHarness(ENGINE);
  await reused.init({ seed: 11 });
  await script(reused);
  reused.nowNs = 5e9;
  await reused.init({ seed: 11, generation: 2, state: reused.store });
  const inPlace = await script(reused);
  await reused.close();

  const fresh = new FakeHarness(ENGINE);
  fresh.nowNs = 5e9;
  await fresh.init({ seed: 11, generation: 2, state: reused.store });
  const inNew = await script(fresh);
  await fresh.close();
  // The same messages, but `generations`/`reinit` are the process's offers (the same here).
  assert.deepEqual(inPlace, inNew);
});

const STATELESS = ["node", fileURLToPath(new URL("./fixtures/generations/stateless.mjs", import.meta.url))];

test("an engine whose modules keep no state starts a generation in place on the modules it has, and nothing else crosses", async () => {
  const harness = new FakeHarness(STATELESS);
  assert.deepEqual(await harness.init({ seed: 3 }), [{ type: "idle", next_timer_ns: null, reinit: true, generations: true, batches: true }]);
  const first = report(await say(harness, "a"));
  assert.deepEqual(first, { generation: 1, seen: ["a"], evaluations: 1, timersFired: 0, globals: [] });
  assert.equal((await say(harness, "timer")).at(-1).next_timer_ns, 1e9, "the old generation's timer is pending");

  harness.nowNs = 500e6;
  const booted = await harness.init({ seed: 3, generation: 2, state: harness.store });
  assert.deepEqual(booted, [{ type: "idle", next_timer_ns: null, reinit: true, generations: true, batches: true }], "the old timer is gone");
  harness.nowNs = 2e9; // past the old timer's time
  const second = report(await say(harness, "b"));
  assert.deepEqual(second, { generation: 2, seen: ["b"], evaluations: 1, timersFired: 0, globals: [] }, "the old generation's global is gone");
  await harness.close();
});

test("a restarted engine draws ids apart from its predecessor's, and each generation's ids are a function of the seed", async () => {
  const drawId = async (harness) => posts(await say(harness, "id"))[0];
  const inPlace = new FakeHarness(ENGINE);
  await inPlace.init({ seed: 5 });
  const first = await drawId(inPlace);
  await inPlace.init({ seed: 5, generation: 2, state: inPlace.store });
  const second = await drawId(inPlace);
  await inPlace.close();
  assert.notEqual(second, first, "generation 2 redrew generation 1's id");

  const fresh = new FakeHarness(ENGINE);
  await fresh.init({ seed: 5, generation: 2 });
  assert.equal(await drawId(fresh), second, "generation 2 in a new process draws what it drew in place");
  await fresh.close();
  const again = new FakeHarness(ENGINE);
  await again.init({ seed: 5 });
  assert.equal(await drawId(again), first, "generation 1 draws from the run's seed");
  await again.close();
});

test("generation seeds are the ones turnsim engine and the Python SDK derive", () => {
  const vectors = JSON.parse(readFileSync(new URL("./fixtures/generation-seeds.json", import.meta.url), "utf8"));
  assert.ok(vectors.length >= 4);
  for (const { seed, generation, derived } of vectors) {
    assert.equal(generationSeed(BigInt(seed), Number(generation)), BigInt(derived), `seed ${seed}, generation ${generation}`);
  }
});
