// The client's translation of Think's frames into turnsim's, and its
// handshake choices, without workerd: Think's frames are fed to
// `receive` as they arrive on the socket, and what it sends is caught.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ThinkClient } from "../client.mjs";

function client(options = {}) {
  const frames = [];
  const sent = [];
  const think = new ThinkClient({ port: 0, instance: "x", connectionId: "c1", onFrame: (frame) => frames.push(frame), ...options });
  think.send = (frame) => sent.push(frame);
  const receive = (data) => think.receive(JSON.stringify(data));
  const chunk = (id, body, extra = {}) => receive({ type: "cf_agent_use_chat_response", id, body: JSON.stringify(body), done: false, ...extra });
  return { think, frames, sent, receive, chunk };
}

test("a stream's chunks go into the message its start named, and its end is Done", () => {
  const { frames, receive, chunk } = client();
  chunk("r1", { type: "start", messageId: "m2" });
  chunk("r1", { type: "text-start", id: "t" });
  chunk("r1", { type: "text-delta", id: "t", delta: "Hi" });
  receive({ type: "cf_agent_use_chat_response", id: "r1", body: "", done: true });
  assert.deepEqual(frames, [
    { Chunk: { request_id: "r1", message_id: "m2", chunk: { type: "text-start", id: "t" } } },
    { Chunk: { request_id: "r1", message_id: "m2", chunk: { type: "text-delta", id: "t", delta: "Hi" } } },
    { Done: { request_id: "r1", continuation: false } }
  ]);
});

test("a continuation's chunks go into the last assistant message shown", () => {
  const { frames, receive, chunk } = client();
  receive({ type: "cf_agent_chat_messages", messages: [{ id: "u1", role: "user", parts: [] }, { id: "m2", role: "assistant", parts: [] }] });
  chunk("r9", { type: "start" }, { continuation: true });
  chunk("r9", { type: "text-start", id: "t" }, { continuation: true });
  assert.equal(frames.at(-1).Chunk.message_id, "m2");
});

test("a tool continuation's chunks go into the reply the driver names, and a transcript shows Think's id under that name", () => {
  const { frames, receive, chunk } = client({
    replyOf: (requestId) => (requestId === "r9" ? "r9-reply" : null),
    named: (messages) => messages.map((message) => (message.id === "uuid" ? { ...message, id: "r9-reply" } : message))
  });
  receive({ type: "cf_agent_chat_messages", messages: [{ id: "u1", role: "user", parts: [] }, { id: "m2", role: "assistant", parts: [] }] });
  chunk("r9", { type: "start" }, { continuation: true });
  chunk("r9", { type: "text-start", id: "t" }, { continuation: true });
  assert.equal(frames.at(-1).Chunk.message_id, "r9-reply");
  receive({ type: "cf_agent_chat_messages", messages: [{ id: "u1", role: "user", parts: [] }, { id: "m2", role: "assistant", parts: [] }, { id: "uuid", role: "assistant", parts: [] }] });
  assert.deepEqual(frames.at(-1).Messages.map((message) => message.id), ["u1", "m2", "r9-reply"]);
});

test("an error end is an Error frame with Think's message", () => {
  const { frames, receive } = client();
  receive({ type: "cf_agent_use_chat_response", id: "r1", body: "could not recover", done: true, error: true });
  assert.deepEqual(frames, [{ Error: { request_id: "r1", message: "could not recover" } }]);
});

test("tool state chunks and message updates become Tool frames, each state once", () => {
  const { frames, receive, chunk } = client();
  chunk("r1", { type: "tool-input-start", toolCallId: "tc", toolName: "get" });
  chunk("r1", { type: "tool-approval-request", toolCallId: "tc", approvalId: "a" });
  receive({ type: "cf_agent_message_updated", message: { id: "m", role: "assistant", parts: [{ type: "tool-get", toolCallId: "tc", state: "approval-requested" }] } });
  receive({ type: "cf_agent_message_updated", message: { id: "m", role: "assistant", parts: [{ type: "tool-get", toolCallId: "tc", state: "output-available" }] } });
  const tools = frames.filter((frame) => frame.Tool).map((frame) => frame.Tool.state);
  assert.deepEqual(tools, ["approval-requested", "output-available"]);
});

test("Think's own resume offer is acked once, at once, and not shown", () => {
  const { frames, sent, receive } = client();
  receive({ type: "cf_agent_stream_resuming", id: "r1" });
  receive({ type: "cf_agent_stream_resuming", id: "r1" });
  assert.deepEqual(sent, [{ type: "cf_agent_stream_resume_ack", id: "r1" }]);
  assert.deepEqual(frames, []);
});

test("the answer to the harness's resume request is shown, and the harness acks it", () => {
  const { think, frames, sent, receive } = client();
  think.resumeRequest();
  receive({ type: "cf_agent_stream_resuming", id: "r1", probeId: "c1-probe" });
  assert.deepEqual(frames, [{ StreamResuming: { request_id: "r1" } }]);
  assert.equal(sent.length, 1, "only the request went out: the ack is the harness's");
  think.resumeRequest();
  receive({ type: "cf_agent_stream_resume_none", probeId: "c1-probe" });
  assert.deepEqual(frames.at(-1), "ResumeNone");
});

test("a client that does not ack offers leaves Think's offers unanswered", () => {
  const { sent, receive } = client({ ackOffersUnasked: false });
  receive({ type: "cf_agent_stream_resuming", id: "r1" });
  assert.deepEqual(sent, []);
});

test("a tool result carries its name, and an error result Think's output-error shape", () => {
  const { think, sent, chunk } = client({ clientTools: [{ name: "get" }] });
  chunk("r1", { type: "tool-input-start", toolCallId: "tc", toolName: "get" });
  think.toolResult("tc", { Output: 3 }, true);
  think.toolResult("tc", { Error: "no" }, false);
  assert.deepEqual(sent[0], { type: "cf_agent_tool_result", toolCallId: "tc", toolName: "get", autoContinue: true, clientTools: [{ name: "get" }], output: 3 });
  assert.equal(sent[1].state, "output-error");
  assert.equal(sent[1].errorText, "no");
  think.toolResult("tc", { Error: null }, false);
  assert.equal(sent[2].state, "output-error");
  assert.ok(!("errorText" in JSON.parse(JSON.stringify(sent[2]))), "an error without text leaves Think its default");
});
