// A continuation held while the stream was open survives a stall that is
// routed to recovery, and fires after the recovery turn has already
// continued the batch: the model is called twice for one batch.
//
// The client answers a tool call while the turn is still streaming; the
// controller holds the continuation (stream-active gate). The stream
// stalls: @cloudflare/think 0.23.0 routes it to recovery and skips the
// finalize re-arm (#1671, `skipFinalizeRearm` / the early return in
// `_streamResult`), but nothing clears `continuation.pending`: only the
// continuation's own turn (`_settleContinuationTurn`) and a chat clear do.
// The recovery turn (`continueLastTurn`) is an ordinary streaming turn;
// its finalize (`_onStreamingTurnFinalized` → `rearmForBatch`) re-arms the
// held continuation, which finds the batch complete and fires.
//
// Run: node adapters/cloudflare-agents/repro/held-continuation-fires-after-recovery.mjs
// (from the turnsim repository, after `npm ci --prefix adapters`).
// Uses only the published `agents` package (`agents/chat`), wired as
// Think wires it. Prints the contract it breaks and exits 1 while the bug
// shows, 0 once fixed.

import { AutoContinuationController, ContinuationState, drainInteractionApplies, hasIncompleteToolBatch } from "agents/chat";

const settle = (ms = 120) => new Promise((resolve) => setTimeout(resolve, ms));
const messages = [
  { id: "u1", role: "user", parts: [{ type: "text", text: "order it" }] },
  { id: "a1", role: "assistant", parts: [{ type: "tool-order", toolCallId: "call-1", state: "input-available", input: {} }] },
];
let streaming = true;
let ids = 0;
const continuation = new ContinuationState();
const modelCalls = ["the user turn (stalls)"];
const controller = new AutoContinuationController({
  continuation,
  generateRequestId: () => `req-${++ids}`,
  isStreamActive: () => streaming,
  hasPendingInteraction: () => false,
  hasIncompleteToolBatch: () => hasIncompleteToolBatch(messages),
  drainInteractionApplies: () => drainInteractionApplies(() => continuation.pending !== null, () => Promise.resolve()),
  keepAliveWhile: (fn) => fn(),
  fire: () => {
    modelCalls.push(`continuation ${continuation.pending.requestId}`);
    continuation.pending.pastCoalesce = true;
    continuation.activatePending();
  },
});

// The client's result lands while the user turn still streams.
messages[1].parts[0] = { ...messages[1].parts[0], state: "output-available", output: "ordered" };
controller.schedule({ connection: { id: "conn-1", send() {} }, clientTools: undefined, body: undefined, errorPrefix: "" });
await settle();
console.log(`while the stream is open: ${modelCalls.length - 1} continuation(s); pending held: ${continuation.pending !== null}`);

// The watchdog fires: the turn is routed to recovery; its finalize does not re-arm (#1671).
streaming = false;
// The recovery alarm: `continueLastTurn` streams a continuation of the message, then finalizes.
streaming = true;
modelCalls.push("recovery continuation (continueLastTurn)");
streaming = false;
controller.rearmForBatch(); // `_onStreamingTurnFinalized`
await settle();
console.log(`model calls: ${modelCalls.join(", ")}`);

if (modelCalls.length > 2) {
  console.log("BUG: the held continuation fired after the recovery turn had already continued the batch");
  console.log(
    "contract: @cloudflare/think 0.23.0 src/think.ts:14943-14947 (in dist/think.js.map): \"A stall-recovery early-return does a plain clear instead (no re-arm): " +
      "its scheduled continuation re-runs the turn and that finalize re-triggers the held barrier, so re-arming here would double-fire alongside the recovery continuation.\" " +
      "(cloudflare/agents#1671: \"a spurious double model invocation\")",
  );
  process.exit(1);
}
console.log("ok: the batch was continued once");
