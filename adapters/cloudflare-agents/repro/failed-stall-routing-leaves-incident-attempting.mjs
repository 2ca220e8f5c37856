// A stall whose routing into recovery fails after the incident opened (the
// partial or the schedule could not be stored) leaves the incident
// `attempting` with nothing scheduled to run it: the turn ends with its
// error, and the store goes on saying a recovery is under way.
//
// @cloudflare/think 0.23.0's `_routeStallToBoundedRecovery` opens the
// incident (`ChatRecoveryEngine.beginIncident`, status `attempting`), then
// persists the partial (`persistPartial`), bumps `recordTransientRetry` and
// schedules (`scheduleRecovery`). A throw from any of these (a rejected
// storage write) reaches `_routeStreamInterruption`, which logs it and
// returns "failed": the caller sends the terminal error, and nothing
// touches the incident. agents 0.32.0 guards its own boot path against
// exactly this ("any throw after the incident opens flips it to `failed`
// so it is never left leaking in `attempting`", `handleChatFiberRecovery`);
// the stall path has no such guard. What reads the leaked incident:
// `classifyAgentToolChildRecovery` reports the child agent "in-progress"
// (a parent agent keeps waiting on a child that is not recovering), and
// `_cf_sealMemoryLimitedRecovery` (the alarm circuit breaker) exhausts it
// later: a second terminal message and `onExhausted` for a turn whose
// failure the user was already told. Until the incident TTL sweep.
//
// This script drives the engine with Think's call sequence for one stall
// whose partial the storage refuses to store (Think's own doc of
// `_routeStreamInterruption` names "a rejected incident write" as a
// routing failure it expects; the app's `onChatRecovery` is the default,
// which returns `{}`).
//
// Run: node adapters/cloudflare-agents/repro/failed-stall-routing-leaves-incident-attempting.mjs
// (from the turnsim repository, after `npm ci --prefix adapters`).
// Uses only the published `agents` package (`agents/chat`). Prints the
// contract it breaks and exits 1 while the bug shows, 0 once fixed.

import {
  ChatRecoveryEngine,
  classifyAgentToolChildRecovery,
  listActiveChatRecoveryIncidents,
  resolveChatRecoveryConfig,
} from "agents/chat";

const rows = new Map();
const storage = {
  get: async (key) => rows.get(key),
  put: async (key, value) => void rows.set(key, structuredClone(value)),
  delete: async (key) => rows.delete(key),
  list: async ({ prefix }) => new Map([...rows].filter(([key]) => key.startsWith(prefix))),
};
const engine = new ChatRecoveryEngine({
  resolveConfig: () => resolveChatRecoveryConfig({}),
  now: () => 1_000_000,
  sweepStaleIncidents: async () => {},
  getIncident: (key) => storage.get(key).then((incident) => incident ?? null),
  putIncident: (key, incident) => storage.put(key, incident),
  deleteIncident: (key) => storage.delete(key),
  syncStorage: async () => {},
  readProgress: async () => 0,
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

/** Think 0.23.0's `_routeStreamInterruption` over `_routeStallToBoundedRecovery`, up to the failing write. */
async function routeStreamInterruption(persistPartial) {
  try {
    const { incident, exhausted } = await engine.beginIncident({
      requestId: "req-1",
      recoveryRootRequestId: "req-1",
      latestUserMessageId: "u1",
      recoveryKind: "continue",
      trigger: "stalled",
    });
    if (exhausted) return "exhausted";
    const targetAssistantId = await persistPartial();
    await engine.recordTransientRetry(incident.incidentId);
    await engine.scheduleRecovery({ incident, recoveryKind: "continue", callback: "_chatRecoveryContinue", data: { targetAssistantId, incidentId: incident.incidentId } });
    return "scheduled";
  } catch {
    return "failed"; // "routing a stream interruption into recovery failed; delivering the terminal error"
  }
}

const outcome = await routeStreamInterruption(async () => {
  throw new Error("storage write rejected"); // the partial could not be stored
});
const active = await listActiveChatRecoveryIncidents(storage);
const child = await classifyAgentToolChildRecovery(storage);
console.log(`routing: ${outcome}; the turn ends with its error`);
console.log(`incidents still live: ${active.map(({ incident }) => `${incident.incidentId} ${incident.status}`).join(", ") || "none"}; as an agent-tool child: ${child}`);

if (outcome === "failed" && active.length > 0) {
  console.log("BUG: a stall whose routing failed leaves its incident live, with no recovery scheduled to end it");
  console.log(
    'contract: @cloudflare/think 0.23.0 src/think.ts:17296-17297 (in dist/think.js.map, _routeStallToBoundedRecovery\'s outcomes): "`failed` — `onChatRecovery` threw; the incident is marked `failed` and the caller runs its generic terminal error path"; ' +
      'agents 0.32.0 dist/chat/index.d.ts:2234-2236 (handleChatFiberRecovery): "Any throw after the incident opens flips it to `failed` so it is never left leaking in `attempting`"',
  );
  process.exit(1);
}
console.log("ok: no incident is left live by a failed routing");
