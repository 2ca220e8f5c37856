// The names the harness is shown, without workerd: the built-in engine's
// (`r1`, `m2`, `m3`, from one counter), Think's ids named at first sight,
// a second id of a message bound to its name, and the names kept for the
// next generation.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Names } from "../names.mjs";

test("a client's request, its user message and Think's reply are r1, m2, m3; a continuation and its reply r4, m5", () => {
  const names = new Names();
  assert.deepEqual(names.userMessage(), { request: "r1", message: "m2" });
  assert.equal(names.message("0b6f-uuid-reply"), "m3");
  assert.equal(names.request("c4d1-uuid"), "r4");
  assert.equal(names.message("c4d1-uuid-reply"), "m5");
  assert.deepEqual(names.frame({ Done: { request_id: "r1", continuation: false } }), { Done: { request_id: "r1", continuation: false } });
  assert.deepEqual(names.frame({ Chunk: { request_id: "c4d1-uuid", message_id: "c4d1-uuid-reply", chunk: { type: "text-delta" } } }), {
    Chunk: { request_id: "r4", message_id: "m5", chunk: { type: "text-delta" } }
  });
  assert.deepEqual(names.frame({ Messages: [{ id: "m2" }, { id: "0b6f-uuid-reply" }] }), { Messages: [{ id: "m2" }, { id: "m3" }] });
  assert.equal(names.frame("ResumeNone"), "ResumeNone");
  assert.equal(names.thinkRequest("r4"), "c4d1-uuid");
  assert.equal(names.thinkRequest("r1"), "r1");
});

test("Think's id of a reply the driver named first is shown under that name, and a name is never renamed", () => {
  const names = new Names();
  names.userMessage();
  const reply = names.message("r9-reply");
  names.bind("9f2e-stored-uuid", "r9-reply");
  assert.equal(names.message("9f2e-stored-uuid"), reply);
  assert.equal(names.message(reply), reply);
  assert.equal(names.request("r1"), "r1");
});

test("the next generation keeps every name and goes on counting", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "think-names-"));
  try {
    const file = path.join(dir, "names.json");
    const first = new Names(file);
    first.userMessage();
    first.message("uuid-a");
    const second = new Names(file);
    assert.equal(second.message("uuid-a"), "m3");
    assert.equal(second.request("r1"), "r1");
    assert.deepEqual(second.userMessage(), { request: "r4", message: "m5" });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
