// The SDK's copy of plain data: the copy structuredClone makes, made
// without serializing; anything else is structuredClone's.

import { test } from "node:test";
import assert from "node:assert/strict";
import { cloneData } from "../node/clone.mjs";

test("plain data is copied as structuredClone copies it, and shares nothing with the original", () => {
  const message = {
    id: "m1",
    role: "assistant",
    parts: [
      { type: "text", text: "hi", state: "done", providerMetadata: undefined },
      { type: "tool-fetch", toolCallId: "c1", input: { day: "today", n: -0 }, output: null },
    ],
    metadata: Object.assign(Object.create(null), { k: [1, 2.5, "x", true] }),
  };
  const copy = cloneData(message);
  assert.deepStrictEqual(copy, structuredClone(message));
  assert.ok("providerMetadata" in copy.parts[0], "an undefined field is kept");
  assert.ok(Object.is(copy.parts[1].input.n, -0));
  assert.deepStrictEqual(Object.keys(copy.parts[1]), Object.keys(message.parts[1]));
  copy.parts[1].input.day = "tomorrow";
  copy.parts.push({ type: "text" });
  assert.equal(message.parts[1].input.day, "today");
  assert.equal(message.parts.length, 2);
  assert.equal(Object.getPrototypeOf(copy.metadata), Object.prototype, "as structuredClone: a plain object");
});

test("what is not plain data is structuredClone's: shared and cyclic objects, holes, class instances", () => {
  const shared = { a: 1 };
  const aliased = cloneData({ x: shared, y: shared });
  assert.equal(aliased.x, aliased.y, "one object met twice stays one object");
  const cyclic = { name: "c" };
  cyclic.self = cyclic;
  const cycleCopy = cloneData(cyclic);
  assert.equal(cycleCopy.self, cycleCopy);
  const holes = cloneData([1, , 3]);
  assert.ok(!(1 in holes), "a hole stays a hole");
  const dated = cloneData({ at: new Date(5), map: new Map([["k", 1]]) });
  assert.ok(dated.at instanceof Date && dated.at.getTime() === 5);
  assert.ok(dated.map instanceof Map && dated.map.get("k") === 1);
  const own = JSON.parse('{"__proto__": {"p": 1}}');
  const protoCopy = cloneData(own);
  assert.ok(Object.hasOwn(protoCopy, "__proto__"), "an own __proto__ is copied as a property");
  assert.equal(protoCopy.p, undefined);
  assert.throws(() => cloneData({ f() {} }), { name: "DataCloneError" });
});
