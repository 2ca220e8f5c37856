// The SDK under a fake harness: handshake, lockstep, virtual time, seeded
// randomness, requests, and the faults a harness must detect.

import { afterEach, test as nodeTest } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { FakeHarness, EngineFault, killAll } from "./fake-harness.mjs";

// A test that fails mid-conversation must not leave its engine waiting on stdin.
const test = (name, fn) => nodeTest(name, { timeout: 20_000 }, fn);
afterEach(killAll);

const PROBE = ["node", fileURLToPath(new URL("./fixtures/probe-engine.mjs", import.meta.url))];

const posts = (messages) => messages.filter((message) => message.type === "post").map((message) => message.text);
const idleOf = (messages) => messages.at(-1);

async function probe(seed = 7) {
  const harness = new FakeHarness(PROBE);
  await harness.init({ seed });
  return harness;
}

async function say(harness, text, atNs) {
  if (atNs !== undefined) harness.nowNs = atNs;
  return harness.input({ type: "user_message", text, options: { stall_timeout_ms: null } });
}

test("init is answered with idle and no timer", async () => {
  const harness = new FakeHarness(PROBE);
  const messages = await harness.init();
  assert.deepEqual(messages, [{ type: "idle", next_timer_ns: null, reinit: true, batches: true }]);
  assert.equal(await harness.close(), 0, "the engine exits cleanly when stdin closes");
});

test("capabilities given to runEngine are declared on the idle that answers init, and only there", async () => {
  const harness = new FakeHarness([...PROBE, "--capabilities=recovery,messenger"]);
  const messages = await harness.init();
  assert.deepEqual(messages, [{ type: "idle", next_timer_ns: null, reinit: true, batches: true, capabilities: ["recovery", "messenger"] }]);
  assert.equal(idleOf(await say(harness, "chain")).capabilities, undefined, "a later idle declares nothing");
  await harness.close();
});

test("lockstep: nothing is written after idle until the next input", async () => {
  const harness = await probe();
  const messages = await say(harness, "chain");
  assert.deepEqual(posts(messages), ["chain done"], "immediates, ticks and microtasks ran before idle");
  assert.equal(idleOf(messages).type, "idle");
  assert.ok(await harness.silentFor(200), "the engine wrote after idle");
  await harness.close();
});

test("the clock is the harness's: Date.now is wall_base_ms + now_ns/1e6", async () => {
  const harness = new FakeHarness(PROBE);
  await harness.init({ wallBaseMs: 1_000_000 });
  const [reading] = posts(await say(harness, "time", 2_500_000_000));
  assert.equal(reading, `1002500 2500 ${new Date(1_002_500).toISOString()}`);
  await harness.close();
});

test("a timer fires only on timer, at the time it asked for", async () => {
  const harness = await probe();
  const armed = await say(harness, "timer 5000", 1_000_000_000);
  assert.deepEqual(posts(armed), []);
  assert.equal(idleOf(armed).next_timer_ns, 6_000_000_000, "idle reports the timer's due time");
  const early = await say(harness, "time", 5_999_000_000);
  assert.deepEqual(posts(early).length, 1, "another input before the due time does not fire it");
  assert.equal(idleOf(early).next_timer_ns, 6_000_000_000, "the timer is re-reported at every idle");
  const fired = await harness.timer(6_000_000_000);
  assert.deepEqual(posts(fired), ["timer 5000 fired at 6000"]);
  assert.equal(idleOf(fired).next_timer_ns, null);
  await harness.close();
});

test("intervals, promise timers and cleared timers follow virtual time", async () => {
  const harness = await probe();
  assert.equal(idleOf(await say(harness, "cancel 10")).next_timer_ns, null, "a cleared timer is not reported");
  assert.equal(idleOf(await say(harness, "sleep 250")).next_timer_ns, 250_000_000);
  assert.deepEqual(posts(await harness.timer(250_000_000)), ["slept 250 until 250"]);
  await say(harness, "interval 100");
  const ticks = [];
  for (const at of [350_000_000, 450_000_000, 550_000_000]) ticks.push(...posts(await harness.timer(at)));
  assert.deepEqual(ticks, ["tick 1 at 350", "tick 2 at 450", "tick 3 at 550"]);
  assert.equal(idleOf(await say(harness, "time")).next_timer_ns, null, "the cleared interval is gone");
  await harness.close();
});

test("randomness and ids come from the seed", async () => {
  const draw = async (seed) => {
    const harness = await probe(seed);
    const [drawn] = posts(await say(harness, "random"));
    await harness.close();
    return drawn;
  };
  const first = await draw(42);
  assert.equal(await draw(42), first, "the same seed draws the same values");
  assert.notEqual(await draw(43), first, "another seed draws others");
  assert.match(first.split(" ")[1], /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
});

test("a u64 seed beyond 2^53 is read exactly", async () => {
  const draw = async (seed) => {
    const harness = new FakeHarness(PROBE);
    harness.writeRaw(`{"type":"init","now_ns":0,"protocol":7,"seed":${seed},"generation":1,"wall_base_ms":0,"config":{},"state":{}}\n`);
    await harness.readMessage();
    const [drawn] = posts(await say(harness, "random"));
    await harness.close();
    return drawn;
  };
  // The two seeds differ by one and parse to the same double.
  assert.notEqual(await draw("18446744073709551614"), await draw("18446744073709551615"));
});

test("commit is a request: the reply comes back, and a taken write is in the mirror", async () => {
  const harness = await probe();
  const messages = await say(harness, "commit");
  assert.deepEqual(messages[0], { type: "commit", writes: [{ Put: { key: "probe", value: 1 } }] });
  assert.deepEqual(posts(messages), ['commit {"ok":true} 1']);
  assert.deepEqual(harness.store.extra, { probe: 1 });
  await harness.close();

  const refusing = new FakeHarness(PROBE, { refuseCommits: true });
  await refusing.init();
  assert.deepEqual(posts(await say(refusing, "commit")), ['commit {"ok":false,"error":"refused"} undefined']);
  await refusing.close();
});

test("a commit in a run whose store refuses nothing is an effect: no reply waited for, the write still taken", async () => {
  const harness = new FakeHarness(PROBE, { storeMayRefuse: false });
  await harness.init();
  const messages = await say(harness, "commit");
  assert.deepEqual(messages[0], { type: "commit", writes: [{ Put: { key: "probe", value: 1 } }], no_reply: true });
  assert.deepEqual(posts(messages), ['commit {"ok":true} 1']);
  assert.deepEqual(harness.store.extra, { probe: 1 });
  await harness.close();
});

test("a fault point is asked only at a site the run switched on", async () => {
  const harness = new FakeHarness(PROBE, { faultSites: ["late-alarm"] });
  await harness.init();
  const off = await say(harness, "fault slow-coalesce-timer");
  assert.deepEqual(off.map((message) => message.type), ["post", "idle"], "a site switched off is not asked about");
  assert.deepEqual(posts(off), ["fault slow-coalesce-timer false"]);
  const on = await say(harness, "fault late-alarm");
  assert.deepEqual(on[0], { type: "fault_point", site: "late-alarm" });
  assert.deepEqual(posts(on), ["fault late-alarm false"]);
  await harness.close();
});

test("the same inputs give byte-identical output", async () => {
  const run = async () => {
    const harness = await probe(3);
    for (const [text, at] of [["random", 0], ["time", 10], ["timer 20", 20], ["chain", 30]]) await say(harness, text, at * 1e6);
    await harness.timer(40e6);
    await harness.close();
    return harness.transcript.join("\n");
  };
  const first = await run();
  assert.equal(await run(), first);
});

test("post is answered with its number; the surface's answer comes later, as post_done", async () => {
  const harness = await probe();
  const sent = await say(harness, "answered");
  assert.deepEqual(posts(sent), ["first"], "the next post waits for the surface's answer");
  const answered = await harness.input({ type: "post_done", post: 1, delivery: "probe", ok: true });
  assert.deepEqual(posts(answered), ["second"]);
  await say(harness, "answered");
  const refused = await harness.input({ type: "post_done", post: 3, delivery: "probe", ok: false, error: "rate limited" });
  assert.deepEqual(posts(refused), ["refused: rate limited"], "a refused post rejects with the surface's error");
});

test("with next_post in init, a post names its number and waits for no reply", async () => {
  const harness = new FakeHarness(PROBE, { named: true });
  await harness.init();
  const sent = await say(harness, "answered");
  assert.deepEqual(
    sent.filter((message) => message.type === "post"),
    [{ type: "post", delivery: "probe", text: "first", post: 1 }],
  );
  assert.ok(!harness.transcript.some((line) => line.includes('"type":"reply"')), "nothing waited for a reply");
  const answered = await harness.input({ type: "post_done", post: 1, delivery: "probe", ok: true });
  assert.deepEqual(answered.filter((message) => message.type === "post").map((message) => message.post), [2]);
});

test("the inputs of one instant in one line: each settled and answered idle in turn, in one write", async () => {
  const harness = await probe();
  const command = (text) => ({ type: "user_message", text, options: { stall_timeout_ms: null } });
  const answers = await harness.inputs([command("chain"), command("time"), command("timer 5")]);
  assert.deepEqual(answers.map(posts), [["chain done"], [`${1_700_000_000_000} 0 ${new Date(1_700_000_000_000).toISOString()}`], []]);
  assert.deepEqual(answers.map(idleOf), [
    { type: "idle", next_timer_ns: null },
    { type: "idle", next_timer_ns: null },
    { type: "idle", next_timer_ns: 5_000_000 },
  ]);
  assert.ok(await harness.silentFor(50), "nothing after the last idle");
});

test("inputs inside inputs is a protocol error", async () => {
  const harness = await probe();
  harness.write({ type: "inputs", now_ns: 0, inputs: [{ type: "inputs", now_ns: 0, inputs: [] }] });
  assert.equal(await harness.close(), 2);
  assert.match(harness.stderr, /inputs inside inputs/);
});

test("a batch without any input is a protocol error", async () => {
  const harness = await probe();
  harness.write({ type: "inputs", now_ns: 0, inputs: [] });
  assert.equal(await harness.close(), 2);
  assert.match(harness.stderr, /inputs without any input/);
});

test("garbage on stdout is detected as a protocol fault", async () => {
  const harness = await probe();
  await assert.rejects(say(harness, "garbage"), (error) => error instanceof EngineFault && error.kind === "engine-protocol");
  harness.kill();
});

test("a crash before idle is detected, with the engine's stderr", async () => {
  for (const command of ["crash", "exit"]) {
    const harness = await probe();
    await assert.rejects(say(harness, command), (error) => error.kind === "engine-crashed");
    if (command === "crash") assert.match(harness.stderr, /the probe crashes/);
  }
});

test("garbage from the harness makes the engine exit with a protocol error", async () => {
  const harness = await probe();
  harness.writeRaw("{not json\n");
  assert.equal(await harness.close(), 2);
  assert.match(harness.stderr, /protocol: not JSON/);
});

test("a reused process starts each run afresh: clock, timers, generator", async () => {
  const fresh = await probe(5);
  const [expected] = posts(await say(fresh, "random"));
  await fresh.close();

  const reused = new FakeHarness(PROBE);
  const offered = await reused.init({ seed: 9 });
  assert.deepEqual(offered, [{ type: "idle", next_timer_ns: null, reinit: true, batches: true }], "the probe offers reuse on the idle that answers init");
  await say(reused, "random");
  assert.equal(idleOf(await say(reused, "timer 5000", 1e9)).next_timer_ns, 6e9);
  reused.nowNs = 0;
  assert.deepEqual(await reused.init({ seed: 5 }), [{ type: "idle", next_timer_ns: null, reinit: true, batches: true }], "the old run's timer is gone");
  assert.deepEqual(posts(await say(reused, "random")), [expected], "the second run draws what a fresh process with its seed draws");
  assert.deepEqual(posts(await say(reused, "time")), [`1700000000000 0 ${new Date(1_700_000_000_000).toISOString()}`]);
  await reused.close();
});
