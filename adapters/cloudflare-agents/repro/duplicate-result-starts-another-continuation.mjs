// A tool result that matches no waiting tool call (a second result for a
// call already answered) still starts a continuation when it carries
// `autoContinue`. Think's `tool-result` handler
// (`_handleProtocolEvent`, @cloudflare/think 0.23.0) enqueues the apply and
// then calls `_scheduleAutoContinuation` whatever the apply found; once the
// first continuation has ended, `continuation.pending` is empty, so the
// controller opens a new one and `fireWhenStable` fires it: the batch is
// complete and no stream is open. The model is called again for a batch it
// already answered.
//
// The input is one the published client sends: each tab running
// `useAgentChat` with `experimental_automaticToolResolution` executes an
// `input-available` client tool call it has not processed itself and sends
// its result (agents 0.32.0 `dist/chat/react.js:660-692`: the set of
// processed calls is per tab), so two open tabs answer one call twice; a
// reconnecting tab can do the same.
//
// Run: node adapters/cloudflare-agents/repro/duplicate-result-starts-another-continuation.mjs
// (from the turnsim repository, after `npm ci --prefix adapters`).
// Uses only the published `agents` package (`agents/chat`): the
// continuation controller and the tool-result helpers, wired as Think's
// handler wires them. Prints the contract it breaks and exits 1 while the bug shows, 0 once fixed.

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

const first = await toolResult("call-1", "3 meetings"); // the first tab's result
await settle();
console.log(`result for call-1 from one tab applied: ${first}; continuations fired: ${fired.length}`);
const again = await toolResult("call-1", "3 meetings"); // the second tab's
await settle();
console.log(`the same call's result from a second tab applied: ${again}; continuations fired: ${fired.length}`);

if (fired.length > 1) {
  console.log("BUG: a result that changed nothing started another continuation of a batch already continued");
  console.log(
    'contract: @cloudflare/think 0.23.0 docs/client-tools.md:147: "when all pending tool results are received, Think starts a new model turn with the tool results in context"; ' +
      'agents 0.32.0 dist/chat/index.d.ts:2845-2849 (AutoContinuationController.cancelTimer): "a sibling result that re-armed it during a barrier wait can\'t fire a duplicate continuation after this one starts"',
  );
  process.exit(1);
}
console.log("ok: one continuation for one batch");
