// The live bridge's pieces without an engine: the provider's wire (SSE
// rendering, a real HTTP round trip with a cut and an error status), the
// store mirror's writes, a request's messages tied to stored ids, and
// pacing (held back while busy, skipped at rest).

import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { SseRenderer } from "../live/sse.mjs";
import { StoreMirror } from "../live/store.mjs";
import { requestMessages } from "../live/openai.mjs";
import { Pacing } from "../live/pacing.mjs";
import { LiveServer } from "../live/server.mjs";

const events = (text) =>
  text
    .split("\n\n")
    .filter((block) => block.startsWith("data: "))
    .map((block) => block.slice(6))
    .map((data) => (data === "[DONE]" ? data : JSON.parse(data)));

test("chunks render as OpenAI chat completion events, tool input split where the script splits it", () => {
  const renderer = new SseRenderer({ id: "c1", model: "m" });
  const chunks = [
    { type: "text-start", id: "t" },
    { type: "text-delta", id: "t", delta: "Hi" },
    { type: "text-end", id: "t" },
    { type: "tool-input-start", id: "call-1", name: "lookup" },
    { type: "tool-input-delta", id: "call-1", delta: '{"ci' },
    { type: "tool-input-delta", id: "call-1", delta: 'ty":"Lisbon"}' },
    { type: "tool-call", id: "call-1", name: "lookup", input: { city: "Lisbon" } },
    { type: "finish-step", reason: "tool-calls", usage: { input_tokens: 3, output_tokens: 4 } },
    { type: "finish", reason: "tool-calls" },
  ];
  const wire = events(chunks.map((chunk) => renderer.render(chunk)).join(""));
  assert.deepEqual(wire[0].choices[0].delta, { role: "assistant", content: "Hi" }, "the first event names the role");
  assert.deepEqual(wire[1].choices[0].delta.tool_calls[0], { index: 0, id: "call-1", type: "function", function: { name: "lookup", arguments: "" } });
  assert.equal(wire[2].choices[0].delta.tool_calls[0].function.arguments + wire[3].choices[0].delta.tool_calls[0].function.arguments, '{"city":"Lisbon"}');
  assert.equal(wire[4].choices[0].finish_reason, "tool_calls");
  assert.deepEqual(wire[5].usage, { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 });
  assert.equal(wire[6], "[DONE]");
  assert.equal(wire.length, 7, "a finished call whose input streamed adds nothing, nor do part boundaries");
});

test("an unknown finish goes out with no finish reason, and a call that never streamed its input goes whole", () => {
  const renderer = new SseRenderer();
  const unknown = events(renderer.render({ type: "finish-step", reason: "unknown", usage: { input_tokens: 1, output_tokens: 0 } }));
  assert.equal(unknown.length, 1, "only usage");
  assert.deepEqual(unknown[0].choices, []);
  const whole = events(renderer.render({ type: "tool-call", id: "x", name: "f", input: { a: 1 } }));
  assert.equal(whole[0].choices[0].delta.tool_calls[0].function.arguments, '{"a":1}');
});

test("the store mirror puts what is new or changed, removes what is gone, and places an insertion", () => {
  const user = (id, text) => ({ id, role: "user", parts: [{ type: "text", id: "u", text, state: "done" }] });
  const mirror = new StoreMirror([user("m2", "hi")]);
  assert.deepEqual(mirror.update([user("m2", "hi")]), [], "nothing changed, nothing written");
  const reply = { id: "m3", role: "assistant", parts: [{ type: "step-start" }] };
  assert.deepEqual(mirror.update([user("m2", "hi"), reply]), [{ PutMessage: reply }]);
  assert.deepEqual(mirror.update([user("m2", "hi"), user("m4", "again"), reply]), [{ PutMessageAfter: { after: "m2", message: user("m4", "again") } }]);
  assert.deepEqual(mirror.update([user("m2", "hello")]), [{ RemoveMessage: "m4" }, { RemoveMessage: "m3" }, { PutMessage: user("m2", "hello") }]);
});

test("a request's messages take the stored ids, answered tools their stored outcome, and end on the reply being written", () => {
  const stored = [
    { id: "m2", role: "user", parts: [{ type: "text", id: "p1", text: "weather?", state: "done" }] },
    {
      id: "m3",
      role: "assistant",
      parts: [
        { type: "step-start" },
        { type: "text", id: "p2", text: "Looking.", state: "done" },
        { type: "tool", call_id: "c1", tool_name: "lookup", state: "output-available", input_text: "{}", input: {}, output: { t: 21 }, error_text: null, approval: null, repaired: false },
      ],
    },
  ];
  const body = {
    messages: [
      { role: "system", content: "You are an engine." },
      { role: "user", content: [{ type: "text", text: "weather?" }] },
      { role: "assistant", content: "Looking.", tool_calls: [{ id: "c1", type: "function", function: { name: "lookup", arguments: "{}" } }] },
      { role: "tool", tool_call_id: "c1", content: '{"t":21}' },
    ],
  };
  const messages = requestMessages(body, stored);
  assert.deepEqual(messages.map((message) => message.id), ["m2", "m3"], "the system prompt is left out");
  const parts = messages[1].parts;
  assert.deepEqual(parts.map((part) => part.type), ["step-start", "text", "tool", "step-start"], "a step-start for the step asked for");
  assert.deepEqual([parts[1].id, parts[2].output], ["p2", { t: 21 }]);
  const unanswered = requestMessages({ messages: body.messages.slice(0, 3) }, stored);
  assert.equal(unanswered[1].parts[2].state, "input-available", "a call the request shows no result for");
  const first = requestMessages({ messages: body.messages.slice(0, 2) }, stored);
  assert.deepEqual(first[1], { id: "m3", role: "assistant", parts: [{ type: "step-start" }] }, "a new turn writes into the reply stored for it");
});

test("a request's step is ordered as its stored step when the store holds each of its parts, never otherwise", () => {
  const tool = { type: "tool", call_id: "c1", tool_name: "lookup", state: "output-available", input_text: "{}", input: {}, output: { t: 21 }, error_text: null, approval: null, repaired: false };
  const reply = (text) => ({ id: "m3", role: "assistant", parts: [{ type: "step-start" }, tool, { type: "text", id: "p2", text, state: "done" }] });
  const user = { id: "m2", role: "user", parts: [{ type: "text", id: "p1", text: "weather?", state: "done" }] };
  const body = {
    messages: [
      { role: "user", content: "weather?" },
      { role: "assistant", content: "Still here.", tool_calls: [{ id: "c1", type: "function", function: { name: "lookup", arguments: "{}" } }] },
      { role: "tool", tool_call_id: "c1", content: '{"t":21}' },
    ],
  };
  const kinds = (messages) => messages[1].parts.map((part) => part.type);
  assert.deepEqual(kinds(requestMessages(body, [user, reply("Still here.")])), ["step-start", "tool", "text", "step-start"], "the call streamed before the text, as stored");
  assert.deepEqual(kinds(requestMessages(body, [user, reply("Something else.")])), ["step-start", "text", "tool", "step-start"], "a step the store does not hold as shown keeps the wire's order");
});

test("pacing holds an input back until its time while the engine is busy, and skips ahead at rest", async () => {
  const pacing = new Pacing({ tickMs: 5, skipRest: true });
  pacing.start(0);
  assert.equal(pacing.nextTimer(0, true), 5_000_000, "busy: a tick away");
  let started = performance.now();
  await pacing.until(60_000_000);
  assert.ok(performance.now() - started >= 55, "busy: held back to its time");
  assert.equal(pacing.nextTimer(60_000_000, false), null, "at rest: no timer");
  started = performance.now();
  await pacing.until(10_060_000_000);
  assert.ok(performance.now() - started < 50, "at rest: ten seconds skipped");
  assert.ok(pacing.skippedMs > 9_000);
});

test("the provider answers a scripted request with the world's chunks, cuts it with a reset, and fails one with a status before headers", async () => {
  const seen = [];
  const server = new LiveServer({ observe: (item) => seen.push(item), classify: () => null, retryAfterMs: 1500 });
  const base = await server.listen();
  const post = () =>
    new Promise((resolve) => {
      let answered = false;
      const request = http.request(`${base}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" } }, (response) => {
        answered = true;
        let text = "";
        response.on("data", (part) => (text += part));
        let failed = null;
        response.on("error", (error) => (failed = error.code ?? error.message));
        response.on("aborted", () => (failed ??= "aborted"));
        response.on("close", () => resolve({ status: response.statusCode, headers: response.headers, text, error: response.complete ? failed : (failed ?? "incomplete") }));
      });
      request.on("error", (error) => answered || resolve({ error: error.code ?? error.message }));
      request.end(JSON.stringify({ model: "m", stream: true, messages: [] }));
    });
  const until = async (count) => {
    while (seen.filter((item) => item.kind === "model-open").length < count) await new Promise((resolve) => setTimeout(resolve, 5));
  };
  const answered = post();
  await until(1);
  server.numbered(seen[0].call, 1);
  server.chunk(1, { type: "text-delta", id: "t", delta: "Hello" });
  server.chunk(1, { type: "finish", reason: "stop" });
  server.end(1, { kind: "closed" });
  const first = await answered;
  assert.equal(first.status, 200);
  assert.equal(events(first.text)[0].choices[0].delta.content, "Hello");

  const cut = post();
  await until(2);
  server.numbered(seen[1].call, 2);
  server.chunk(2, { type: "text-delta", id: "t", delta: "Half" });
  server.end(2, { kind: "cut" });
  const torn = await cut;
  assert.ok(torn.text.includes("Half"), "what was sent before the cut arrives");
  assert.ok(torn.error, "the connection ends in an error, not a clean end");

  const refused = post();
  await until(3);
  server.numbered(seen[2].call, 3);
  server.end(3, { kind: "http", status: 503, message: "overloaded" });
  const status = await refused;
  assert.equal(status.status, 503);
  assert.equal(status.headers["retry-after-ms"], "1500");
  assert.equal(JSON.parse(status.text).error.type, "server_error");
  server.close();
});
