// The driver's account of a tool continuation, without workerd: the
// request's steps split back into the messages Think stores them in (a
// continuation's answer is a message of its own), and Think's id for that
// message shown under the name the harness knew it by.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ThinkDriver, splitReplies } from "../driver.mjs";

const user = { id: "u1", role: "user", parts: [{ type: "text", id: "user", text: "hi", state: "done" }] };
const call = (id) => ({ type: "tool", call_id: id, tool_name: "get", state: "output-available" });
const text = (id, value) => ({ type: "text", id, text: value, state: "done" });

test("a tool continuation's step goes into its own reply; the stored steps stay in the message that stored them", () => {
  const stored = [user, { id: "m1", role: "assistant", parts: [{ type: "step-start" }, call("tc-1")] }];
  const messages = [user, { id: "m1", role: "assistant", parts: [{ type: "step-start" }, call("tc-1"), { type: "step-start" }] }];
  splitReplies(messages, stored, "r2-reply");
  assert.deepEqual(messages.slice(1), [
    { id: "m1", role: "assistant", parts: [{ type: "step-start" }, call("tc-1")] },
    { id: "r2-reply", role: "assistant", parts: [{ type: "step-start" }] }
  ]);
});

test("a second continuation: each stored reply keeps its steps and text ids; the unstored steps go with the one asked for", () => {
  const stored = [
    user,
    { id: "m1", role: "assistant", parts: [{ type: "step-start" }, call("tc-1")] },
    { id: "r2-reply", role: "assistant", parts: [{ type: "step-start" }, text("t-stored", "ok"), call("tc-2")] }
  ];
  const wire = [{ type: "step-start" }, call("tc-1"), { type: "step-start" }, text("part-3", "ok"), call("tc-2"), { type: "step-start" }, call("tc-3"), { type: "step-start" }];
  const messages = [user, { id: "m1", role: "assistant", parts: wire }];
  splitReplies(messages, stored, "r3-reply");
  assert.deepEqual(
    messages.map((message) => [message.id, message.parts.map((part) => part.call_id ?? part.id ?? part.type)]),
    [
      ["u1", ["user"]],
      ["m1", ["step-start", "tc-1"]],
      ["r2-reply", ["step-start", "t-stored", "tc-2"]],
      ["r3-reply", ["step-start", "tc-3", "step-start"]]
    ]
  );
});

test("a recovery's continue (no reply of its own) extends the last stored reply", () => {
  const stored = [user, { id: "m1", role: "assistant", parts: [{ type: "step-start" }, call("tc-1")] }, { id: "r2-reply", role: "assistant", parts: [{ type: "step-start" }, text("t", "par")] }];
  const messages = [user, { id: "m1", role: "assistant", parts: [{ type: "step-start" }, call("tc-1"), { type: "step-start" }, text("part-3", "par"), { type: "step-start" }] }];
  splitReplies(messages, stored, null);
  assert.deepEqual(messages.at(-1), { id: "r2-reply", role: "assistant", parts: [{ type: "step-start" }, text("t", "par"), { type: "step-start" }] });
  assert.equal(messages.length, 3);
});

test("Think's id of a continuation's reply is shown as the reply's name once stored after the leaf it continued, and only that one", () => {
  const driver = new ThinkDriver({});
  driver.requests.set("r2", { streaming: false, continuation: true, replyId: "r2-reply", leafId: "m1" });
  const think = [user, { id: "m1", role: "assistant", parts: [] }, { id: "uuid-a", role: "assistant", parts: [] }];
  assert.deepEqual(driver.named(think).map((message) => message.id), ["u1", "m1", "r2-reply"]);
  const later = [...think, { id: "u2", role: "user", parts: [] }, { id: "uuid-b", role: "assistant", parts: [] }];
  assert.deepEqual(driver.named(later).map((message) => message.id), ["u1", "m1", "r2-reply", "u2", "uuid-b"]);
  assert.equal(driver.replyOf("r2"), "r2-reply");
  assert.equal(driver.replyOf("r1"), null);
});
