// A tool result that matches no waiting tool call (a duplicate the client
// sent again, or one for an unknown call) still starts a continuation when
// it carries `autoContinue`. Think's `tool-result` handler
// (`_handleProtocolEvent`, @cloudflare/think 0.23.0) enqueues the apply and
// then calls `_scheduleAutoContinuation` whatever the apply found; once the
// first continuation has ended, `continuation.pending` is empty, so the
// controller opens a new one and `fireWhenStable` fires it: the batch is
// complete and no stream is open. The model is called again for a batch it
// already answered.
//
// Run: node adapters/cloudflare-agents/repro/duplicate-result-starts-another-continuation.mjs
// (from the turnsim repository, after `npm ci --prefix adapters`).
// Uses only the published `agents` package (`agents/chat`): the
// continuation controller and the tool-result helpers, wired as Think's
// handler wires them. Exits 1 while the bug shows, 0 once fixed.

import {
  AutoContinuationController,
  ContinuationState,
  applyToolUpdate,
  drainInteractionApplies,
  hasIncompleteToolBatch,
  toolResultUpdate,
} from "agents/chat";

const settle = (ms = 120) => new Promise((resolve) => setTimeout(resolve, ms));
let messages = [
  { id: "u1", role: "user", parts: [{ type: "text", text: "look it up" }] },
  { id: "a1", role: "assistant", parts: [{ type: "tool-lookup", toolCallId: "call-1", state: "input-available", input: {} }] },
];
let ids = 0;
let tail = Promise.resolve();
const continuation = new ContinuationState();
const fired = [];
const controller = new AutoContinuationController({
  continuation,
  generateRequestId: () => `req-${++ids}`,
  isStreamActive: () => false,
  hasPendingInteraction: () => false,
  hasIncompleteToolBatch: () => hasIncompleteToolBatch(messages),
  drainInteractionApplies: () => drainInteractionApplies(() => continuation.pending !== null, () => tail),
  keepAliveWhile: (fn) => fn(),
  // Think's `_fireAutoContinuation`: the turn runs, and clears `pending` when it ends.
  fire: () => {
    const pending = continuation.pending;
    fired.push(pending.requestId);
    pending.pastCoalesce = true;
    continuation.activatePending();
  },
});
const connection = { id: "conn-1", send() {} };

/** Think's `tool-result` case: enqueue the apply, then schedule the continuation if `autoContinue`. */
function toolResult(toolCallId, output) {
  tail = tail.then(() => {
    for (const message of messages) {
      const found = applyToolUpdate(message.parts, toolResultUpdate(toolCallId, output));
      if (found) {
        message.parts = found.parts;
        return true;
      }
    }
    return false;
  });
  controller.schedule({ connection, clientTools: undefined, body: undefined, errorPrefix: "continuation failed:" });
  return tail;
}

const first = await toolResult("call-1", "3 meetings");
await settle();
console.log(`result for call-1 applied: ${first}; continuations fired: ${fired.length}`);
const again = await toolResult("call-1", "3 meetings");
await settle();
const unknown = await toolResult("call-unknown", "?");
await settle();
console.log(`the same result again applied: ${again}; a result for an unknown call applied: ${unknown}; continuations fired: ${fired.length}`);

if (fired.length > 1) {
  console.log("BUG: results that changed nothing started another continuation of a batch already continued");
  process.exit(1);
}
console.log("ok: one continuation for one batch");
