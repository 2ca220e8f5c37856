// The Cloudflare engine under the fake harness: the #1649 race driven by
// hand. Cloudflare's AutoContinuationController holds the continuation
// while the stream is open, on virtual time, and fires it once, on a
// `timer`, after the stream ends. And client input reaches Think as the
// published client sends it: no approval for a call that asked none.

import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { FakeHarness, DEFAULT_CONFIG, killAll } from "./fake-harness.mjs";

const ENGINE = ["node", fileURLToPath(new URL("../cloudflare-agents/engine.mjs", import.meta.url))];
const CONFIG = { ...DEFAULT_CONFIG, tools: { fast_tool: "client", slow_tool: "client" } };

afterEach(killAll);

const requests = (messages) => messages.filter((message) => message.type === "model_request").map((message) => message.request);
const observed = (messages, name) => messages.filter((message) => message.type === "observe" && message.event.event === name);
const idleTimer = (messages) => messages.at(-1).next_timer_ns;

async function chunk(harness, atMs, body) {
  harness.nowNs = atMs * 1e6;
  return harness.input({ type: "model_chunk", call: 1, chunk: body });
}

async function result(harness, atMs, callId) {
  harness.nowNs = atMs * 1e6;
  return harness.input({ type: "tool_result", result: { call_id: callId, outcome: { Output: "ok" } }, auto_continue: true });
}

test("the continuation waits for the open stream and fires once, on a timer", { timeout: 30_000 }, async () => {
  const harness = new FakeHarness(ENGINE);
  await harness.init({ config: CONFIG });
  await harness.input({ type: "connect", connection: 1 });
  const started = await harness.input({ type: "user_message", text: "do both", options: { stall_timeout_ms: null } });
  assert.deepEqual(requests(started).map((request) => request.continuation), [false], "the user turn calls the model once");

  // The fast tool is called and answered while the stream goes on.
  await chunk(harness, 0, { type: "tool-call", id: "tc-fast", name: "fast_tool", input: {} });
  await chunk(harness, 0, { type: "text-start", id: "t1" });
  const answered = await result(harness, 20, "tc-fast");
  assert.equal(idleTimer(answered), 70e6, "the coalesce timer is armed for 50 ms after the result");
  const held = await harness.timer(70e6);
  assert.deepEqual(requests(held), [], "no continuation while the stream is open");
  assert.equal(idleTimer(held), null, "the barrier holds without a timer");

  // The slow sibling arrives, is answered, and the stream ends.
  await chunk(harness, 400, { type: "tool-call", id: "tc-slow", name: "slow_tool", input: {} });
  await result(harness, 500, "tc-slow");
  assert.deepEqual(requests(await harness.timer(550e6)), [], "still open: still held");
  await chunk(harness, 600, { type: "text-end", id: "t1" });
  await chunk(harness, 600, { type: "finish-step", reason: "tool-calls", usage: { input_tokens: 1, output_tokens: 3 } });
  const ended = await chunk(harness, 600, { type: "finish", reason: "tool-calls" });
  assert.deepEqual(requests(ended), [], "the stream's end re-arms the barrier, it does not fire at once");
  assert.equal(idleTimer(ended), 650e6);

  const fired = await harness.timer(650e6);
  assert.equal(observed(fired, "continuation-fired").length, 1);
  const [continuation] = requests(fired);
  assert.equal(continuation.continuation, true);
  const tools = continuation.messages.flatMap((message) => message.parts).filter((part) => part.type === "tool");
  assert.deepEqual(
    tools.map((tool) => [tool.call_id, tool.state]),
    [
      ["tc-fast", "output-available"],
      ["tc-slow", "output-available"],
    ],
    "the continuation's request carries both results",
  );
  await harness.close();
});

const writesOf = (messages) => messages.filter((message) => message.type === "commit").flatMap((message) => message.writes);
const typed = (writes, kind) => writes.filter((write) => typeof write === "object" && kind in write).map((write) => write[kind]);

test("a stall's recovery is stored in the store's recovery records: incident, alarm, fired, closed", { timeout: 30_000 }, async () => {
  const harness = new FakeHarness(ENGINE);
  await harness.init({ config: { ...DEFAULT_CONFIG, stall_timeout_ms: 2000 } });
  await harness.input({ type: "connect", connection: 1 });
  await harness.input({ type: "user_message", text: "hello", options: {} });
  await chunk(harness, 0, { type: "text-start", id: "t1" });
  await chunk(harness, 0, { type: "text-delta", id: "t1", delta: "Let me" });

  // The stall opens the incident and schedules its alarm, each as a typed record beside agents' own entry.
  const stalled = await harness.timer(2000e6);
  const stalledWrites = writesOf(stalled);
  const [incident] = typed(stalledWrites, "PutIncident");
  assert.equal(incident.status, "attempting");
  assert.equal(incident.attempt, 1);
  const [alarm] = typed(stalledWrites, "PutAlarm");
  assert.equal(alarm.incident_id, incident.id);
  assert.equal(alarm.due_ms, 1_700_000_000_000 + 2000 + 1000, "due after agents' delay (none) and the platform's alarm delay");
  assert.deepEqual(harness.store.alarms.map((held) => held.id), [alarm.id]);
  assert.ok(Object.keys(harness.store.extra).some((key) => key.startsWith("cf:alarm:")), "agents' schedule row is kept too");
  assert.deepEqual(
    stalled.filter((message) => message.type === "send").map((message) => message.frame).filter((frame) => "Recovering" in frame),
    [{ Recovering: true }],
  );

  // The alarm fires: its typed record goes before the recovery asks the model.
  const fired = await harness.timer(idleTimer(stalled));
  const firstRequest = fired.findIndex((message) => message.type === "model_request");
  const removal = fired.findIndex((message) => message.type === "commit" && typed(message.writes, "RemoveAlarm").includes(alarm.id));
  assert.ok(removal >= 0 && removal < firstRequest, "the alarm is removed as it fires, before the recovery turn");
  assert.equal(requests(fired)[0].continuation, true);

  // The recovery answers: agents deletes the incident, and the typed incident closes with it.
  const all = [...fired];
  for (const body of [
    { type: "text-start", id: "t2" },
    { type: "text-delta", id: "t2", delta: " think." },
    { type: "text-end", id: "t2" },
    { type: "finish-step", reason: "stop", usage: { input_tokens: 1, output_tokens: 1 } },
    { type: "finish", reason: "stop" },
  ]) {
    all.push(...(await harness.input({ type: "model_chunk", call: 2, chunk: body })));
  }
  all.push(...(await harness.input({ type: "model_end", call: 2, end: { kind: "closed" } })));
  assert.ok(typed(writesOf(all), "RemoveIncident").includes(incident.id), "the completed incident is closed");
  assert.deepEqual(harness.store.incidents, {});
  assert.deepEqual(harness.store.alarms, []);
  await harness.close();
});

// The engine passes `moduleState: false`: the generation after an eviction
// reuses its modules, so whatever they kept at the top level would outlive
// the eviction. A tripwire for the plain ways to keep something there.
test("the engine's own modules keep no state at the top level", async () => {
  const { readdir, readFile } = await import("node:fs/promises");
  const folder = new URL("../cloudflare-agents/", import.meta.url);
  const files = (await readdir(folder)).filter((name) => name.endsWith(".mjs"));
  assert.ok(files.length > 0);
  const stateful = /^(export\s+)?(let|var)\s|^(export\s+)?const\s+\w+\s*=\s*new\s+(Map|WeakMap|Array)\b/;
  for (const name of files) {
    const source = await readFile(new URL(name, folder), "utf8");
    const found = source.split("\n").filter((line) => stateful.test(line));
    assert.deepEqual(found, [], `${name} keeps state at the top level`);
  }
});

test("an approval of a call that asked for none is not sent on: useAgentChat has no approval id to send", { timeout: 30_000 }, async () => {
  const harness = new FakeHarness(ENGINE);
  await harness.init({ config: CONFIG });
  await harness.input({ type: "user_message", text: "do it", options: { stall_timeout_ms: null } });
  await chunk(harness, 0, { type: "tool-call", id: "tc-fast", name: "fast_tool", input: {} });
  await chunk(harness, 0, { type: "finish-step", reason: "tool-calls", usage: { input_tokens: 1, output_tokens: 1 } });
  await chunk(harness, 0, { type: "finish", reason: "tool-calls" });
  harness.nowNs = 100e6;
  const approved = await harness.input({ type: "approval", call_id: "tc-fast", approved: true, auto_continue: true });
  assert.equal(observed(approved, "tool-ignored").length, 1, "the approval is dropped");
  assert.equal(idleTimer(approved), null, "and arms no continuation");
  const tool = harness.store.messages.at(-1).parts.find((part) => part.type === "tool");
  assert.equal(tool.state, "input-available", "the call still waits for its result");
  await harness.close();
});
