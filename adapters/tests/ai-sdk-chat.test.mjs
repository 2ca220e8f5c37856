// The AI SDK `Chat` engine under the fake harness: one turn with a client
// tool continued once, two parallel results continued once (the SDK's
// `sendAutomaticallyWhen` decides, after the second), a result that opts
// out of continuing, the user message and answer stored, the capabilities
// it declares, an answered approval shown with its decision, and every
// `chat()` caller given an outcome when a failed request pauses the queue.

import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { FakeHarness, DEFAULT_CONFIG, killAll, textChunks } from "./fake-harness.mjs";

const ENGINE = ["node", fileURLToPath(new URL("../ai-sdk-chat/engine.mjs", import.meta.url))];
const CONFIG = { ...DEFAULT_CONFIG, tools: { lookup: "client", search: "client" } };
const TIMEOUT = { timeout: 30_000 };

afterEach(killAll);

const requests = (messages) => messages.filter((message) => message.type === "model_request").map((message) => message.request);
const frames = (messages, kind) =>
  messages.filter((message) => message.type === "send" && message.frame[kind] !== undefined).map((message) => message.frame[kind]);

/** Streams `chunks` as model call `call`; returns every message the engine wrote meanwhile. */
async function stream(harness, call, chunks) {
  const written = [];
  for (const chunk of chunks) written.push(...(await harness.input({ type: "model_chunk", call, chunk })));
  return written;
}

function result(harness, callId, autoContinue = true) {
  return harness.input({ type: "tool_result", result: { call_id: callId, outcome: { Output: `${callId} ok` } }, auto_continue: autoContinue });
}

const toolCall = (id, name) => ({ type: "tool-call", id, name, input: {} });
const toolsFinish = [
  { type: "finish-step", reason: "tool-calls", usage: { input_tokens: 1, output_tokens: 1 } },
  { type: "finish", reason: "tool-calls" },
];

async function startTurn(harness, text) {
  await harness.init({ config: CONFIG });
  await harness.input({ type: "connect", connection: 1 });
  return harness.input({ type: "user_message", text, options: { stall_timeout_ms: null } });
}

test("its init reply declares what capabilities.json says it implements", TIMEOUT, async () => {
  const listed = JSON.parse(readFileSync(new URL("../ai-sdk-chat/capabilities.json", import.meta.url), "utf8")).capabilities;
  const harness = new FakeHarness(ENGINE);
  const [idle] = await harness.init({ config: CONFIG });
  assert.deepEqual(idle.capabilities, Object.keys(listed).filter((name) => listed[name]));
  assert.deepEqual(idle.capabilities, [], "no recovery, no messenger, none of the built-in engine's references' choices");
  await harness.close();
});

test("one turn with a client tool: the result continues it once, into the same message", TIMEOUT, async () => {
  const harness = new FakeHarness(ENGINE);
  const started = await startTurn(harness, "how many meetings?");
  assert.deepEqual(requests(started).map((request) => request.continuation), [false], "the user turn calls the model once");
  const [asked] = harness.store.messages;
  assert.equal(asked.role, "user", "the user message is stored before the model is called");

  const called = await stream(harness, 1, [toolCall("tc-1", "lookup"), ...toolsFinish]);
  assert.deepEqual(requests(called), [], "a client tool waits for the client");
  assert.ok(frames(called, "Tool").some((tool) => tool.call_id === "tc-1" && tool.state === "input-available"));

  const continued = await result(harness, "tc-1");
  const [continuation] = requests(continued);
  assert.equal(continuation?.continuation, true, "the result continues the turn");
  const tool = continuation.messages.at(-1).parts.find((part) => part.type === "tool");
  assert.deepEqual([tool.call_id, tool.state, tool.output], ["tc-1", "output-available", "tc-1 ok"], "the model is shown the result");

  const answered = await stream(harness, 2, textChunks("t1", ["3 ", "meetings"]));
  assert.deepEqual(frames(answered, "Done").at(-1), { request_id: continuation.request_id, continuation: true });
  const reply = harness.store.messages.at(-1);
  assert.equal(reply.id, continuation.messages.at(-1).id, "the continuation streams into the message it continues");
  assert.equal(reply.parts.filter((part) => part.type === "text").map((part) => part.text).join(""), "3 meetings");
  assert.ok(reply.parts.every((part) => part.state !== "streaming"), "nothing is stored streaming once the answer ended");
  await harness.close();
});

test("two parallel results continue once, after the second", TIMEOUT, async () => {
  const harness = new FakeHarness(ENGINE);
  await startTurn(harness, "meetings and mail?");
  await stream(harness, 1, [toolCall("tc-a", "lookup"), toolCall("tc-b", "search"), ...toolsFinish]);

  assert.deepEqual(requests(await result(harness, "tc-a")), [], "one of two answered: no continuation");
  const both = await result(harness, "tc-b");
  assert.equal(requests(both).length, 1, "the second result completes the batch: one continuation");
  const tools = requests(both)[0].messages.at(-1).parts.filter((part) => part.type === "tool");
  assert.deepEqual(
    tools.map((tool) => [tool.call_id, tool.state]),
    [
      ["tc-a", "output-available"],
      ["tc-b", "output-available"],
    ],
    "the continuation's request carries both results",
  );
  const answered = await stream(harness, 2, textChunks("t1", ["done"]));
  assert.deepEqual(requests(answered), [], "the answer ends the chain");
  await harness.close();
});

test("a result that opts out of continuing leaves the turn with the client", TIMEOUT, async () => {
  const harness = new FakeHarness(ENGINE);
  await startTurn(harness, "how many meetings?");
  await stream(harness, 1, [toolCall("tc-1", "lookup"), ...toolsFinish]);
  const applied = await result(harness, "tc-1", false);
  assert.deepEqual(requests(applied), [], "auto_continue: false does not continue");
  const tool = harness.store.messages.at(-1).parts.find((part) => part.type === "tool");
  assert.equal(tool.state, "output-available", "the result is stored");
  await harness.close();
});

test("a chat() call is answered through its callback, and one delivered again is sent again (sendMessage takes no key)", TIMEOUT, async () => {
  const harness = new FakeHarness(ENGINE);
  await harness.init({ config: CONFIG });
  const callbacks = (messages, chat) =>
    messages.filter((message) => message.type === "callback" && message.chat === chat).map((message) => message.call);
  const started = await harness.input({ type: "chat", chat: 1, key: "k1", text: "hello", options: { stall_timeout_ms: null } });
  assert.deepEqual(callbacks(started, 1), [{ on_start: { request_id: "r1" } }], "on_start names the request that answers");
  const answered = await stream(harness, 1, textChunks("t1", ["hi ", "there"]));
  const calls = callbacks(answered, 1);
  assert.deepEqual(calls.slice(-2), ["on_done", "returned"], "the call ends with on_done, then returns");
  assert.equal(calls.filter((call) => call.on_event).length, 4, "each text chunk is an event");

  const again = await harness.input({ type: "chat", chat: 2, key: "k1", text: "hello", options: { stall_timeout_ms: null } });
  assert.deepEqual(callbacks(again, 2), [{ on_start: { request_id: "r4" } }], "the same key again is a new request, as Think's chat() takes it");
  assert.equal(requests(again).length, 1, "and the model is asked again");
  await harness.close();
});

test("chat() callers whose messages wait in the queue are told when a failed request pauses it", TIMEOUT, async () => {
  const harness = new FakeHarness(ENGINE);
  await harness.init({ config: CONFIG });
  const callbacks = (messages, chat) =>
    messages.filter((message) => message.type === "callback" && message.chat === chat).map((message) => message.call);
  await harness.input({ type: "chat", chat: 1, key: "k1", text: "tell me a story", options: { stall_timeout_ms: null } });
  await stream(harness, 1, [{ type: "text-start", id: "t1" }, { type: "text-delta", id: "t1", delta: "Once" }]);
  const queued = [
    ...(await harness.input({ type: "chat", chat: 2, key: "k2", text: "and then?", options: { stall_timeout_ms: null } })),
    ...(await harness.input({ type: "chat", chat: 3, key: "k3", text: "and after?", options: { stall_timeout_ms: null } })),
  ];
  assert.deepEqual(requests(queued), [], "both wait in the queue while the first streams");
  const failed = await harness.input({ type: "model_end", call: 1, end: { kind: "http", status: 400 } });
  assert.deepEqual(callbacks(failed, 1).at(-2), { on_error: { message: "provider error 400" } }, "the failed request's caller is told");
  for (const chat of [2, 3]) {
    const [start, error, returned] = callbacks(failed, chat);
    assert.ok(start.on_start && error.on_error && returned === "returned", `caller ${chat} gets an outcome: ${JSON.stringify(callbacks(failed, chat))}`);
    assert.match(error.on_error.message, /not sent: the chat's queue is paused/);
  }
  assert.deepEqual(requests(failed), [], "and the paused queue sends nothing");
  await harness.close();
});

test("an answered approval is shown to clients with its decision, at once", TIMEOUT, async () => {
  const harness = new FakeHarness(ENGINE);
  await harness.init({ config: { ...DEFAULT_CONFIG, tools: { deploy: "approval" } } });
  await harness.input({ type: "connect", connection: 1 });
  await harness.input({ type: "user_message", text: "deploy it", options: { stall_timeout_ms: null } });
  await stream(harness, 1, [toolCall("tc-1", "deploy"), ...toolsFinish]);
  await harness.input({ type: "model_end", call: 1, end: { kind: "closed" } });
  const answered = await harness.input({ type: "approval", call_id: "tc-1", approved: false, auto_continue: false });
  assert.deepEqual(frames(answered, "Tool").map((tool) => tool.state), ["approval-responded"]);
  const shown = frames(answered, "Messages").at(-1)?.flatMap((message) => message.parts).find((part) => part.call_id === "tc-1");
  assert.equal(shown?.approval?.approved, false, "the transcript sent with it shows the denial");
  await harness.close();
});
