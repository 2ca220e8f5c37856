// Every stall spends the transient-retry budget, so a stream that makes
// progress between its stalls is given up after `maxAttempts` stalls in
// all, although progress resets the attempt count.
//
// @cloudflare/think 0.23.0 routes a stall into recovery with
// `_routeStallToBoundedRecovery`, which opens the incident
// (`ChatRecoveryEngine.beginIncident`, trigger `stalled`) and then calls
// `recordTransientRetry` for the incident unconditionally; the backoff it
// returns is used only for a transient error (`backoff: !stalled`), but the
// counter is bumped for a stall too. agents 0.32.0's
// `evaluateChatRecoveryIncident` exhausts the incident once
// `transientRetries >= maxAttempts`, whatever the progress or the debounce
// say (`transientBudgetExceeded`). Think's own comment describes the stall
// budget as "maxAttempts + wall-clock window + progress-aware reset".
//
// This script drives the engine with Think's call sequence for three
// stalls of one turn, with new output stored before each (the progress
// marker moves), and `maxAttempts: 2`.
//
// Run: node adapters/cloudflare-agents/repro/stalls-spend-the-transient-budget.mjs
// (from the turnsim repository, after `npm ci --prefix adapters`).
// Uses only the published `agents` package (`agents/chat`). Exits 1 while
// the bug shows, 0 once fixed.

import { ChatRecoveryEngine, resolveChatRecoveryConfig } from "agents/chat";

const storage = new Map();
let progress = 0;
let now = 1_000_000;
const engine = new ChatRecoveryEngine({
  resolveConfig: () => resolveChatRecoveryConfig({ maxAttempts: 2 }),
  now: () => now,
  sweepStaleIncidents: async () => {},
  getIncident: async (key) => storage.get(key) ?? null,
  putIncident: async (key, incident) => void storage.set(key, structuredClone(incident)),
  deleteIncident: async (key) => void storage.delete(key),
  syncStorage: async () => {},
  readProgress: async () => progress,
  isAwaitingClientInteraction: () => false,
  emitRecoveryEvent: () => {},
  scheduleRecovery: async () => {},
  setRecovering: async () => {},
  exhaustChatRecovery: async () => {},
  resolveRecoveryStream: () => ({ streamId: "", streamStillActive: false }),
  getPartialStreamText: () => ({ text: "", parts: [], hasSettledToolResults: false }),
  activeChatRecoveryRootRequestId: () => undefined,
  onGiveUpBookkeepingError: () => {},
});

const outcomes = [];
for (let stall = 1; stall <= 3; stall += 1) {
  progress += 5; // the turn (or its recovery) streamed and stored new output before this stall
  now += 60_000; // a minute apart: past the 30 s debounce, well inside the no-progress window
  const { incident, exhausted } = await engine.beginIncident({
    requestId: "req-1",
    recoveryRootRequestId: "req-1",
    latestUserMessageId: "u1",
    recoveryKind: "continue",
    trigger: "stalled",
  });
  outcomes.push(`stall ${stall}: attempt ${incident.attempt}, ${exhausted ? `exhausted (${incident.reason})` : "recovering"}`);
  if (exhausted) break;
  await engine.recordTransientRetry(incident.incidentId); // Think 0.23.0 does this for a stall too
}
console.log(outcomes.join("\n"));

if (outcomes.some((line) => line.includes("exhausted"))) {
  console.log("BUG: a turn that made progress before every stall was given up: each stall spent the transient-retry budget");
  process.exit(1);
}
console.log("ok: progress keeps the budget");
