// A recovery that ends (completed, skipped or failed) tells every client
// that no recovery is under way, while another incident's recovery is
// still scheduled; a client that connects then is told nothing either.
//
// agents 0.32.0's `ChatRecoveryEngine.updateIncident` calls
// `adapter.setRecovering(false)` on every completed / skipped / failed
// transition, with no incident or request id, and `setChatRecovering` keeps
// the "recovering…" status (#1620) as one flag per agent
// (`cf:chat:recovering`): setting it while it is set does nothing, and
// clearing it deletes it whichever incident set it. Two incidents open at
// once (a second message's reply stalls while the first's recovery waits
// for the busy session) share the flag, and the first to end clears it.
//
// This script drives the engine with the calls Think 0.23.0 makes for two
// stalled turns (`beginIncident` + `scheduleRecovery` each, its adapter's
// `setRecovering` calling `setChatRecovering` over the agent's storage),
// then stands the first recovery down as `_chatRecoveryContinue` does when
// the conversation moved on (`updateIncident(..., "skipped",
// "conversation_changed")`).
//
// Run: node adapters/cloudflare-agents/repro/recovery-end-clears-another-recovery-status.mjs
// (from the turnsim repository, after `npm ci --prefix adapters`).
// Uses only the published `agents` package (`agents/chat`). Prints the
// contract it breaks and exits 1 while the bug shows, 0 once fixed.

import { ChatRecoveryEngine, buildChatRecoveringFrame, resolveChatRecoveryConfig, setChatRecovering } from "agents/chat";

const storage = new Map();
const kv = {
  get: async (key) => storage.get(key),
  put: async (key, value) => void storage.set(key, structuredClone(value)),
  delete: async (key) => storage.delete(key),
};
const frames = [];
const now = 1_000_000;
const engine = new ChatRecoveryEngine({
  resolveConfig: () => resolveChatRecoveryConfig({}),
  now: () => now,
  sweepStaleIncidents: async () => {},
  getIncident: (key) => kv.get(key).then((incident) => incident ?? null),
  putIncident: (key, incident) => kv.put(key, incident),
  deleteIncident: (key) => kv.delete(key),
  syncStorage: async () => {},
  readProgress: async () => 0,
  isAwaitingClientInteraction: () => false,
  emitRecoveryEvent: () => {},
  scheduleRecovery: async () => {},
  setRecovering: (active, requestId) =>
    setChatRecovering(active, requestId, { storage: kv, messageType: "cf_agent_chat_recovering", broadcast: (frame) => frames.push(frame), now }),
  exhaustChatRecovery: async () => {},
  resolveRecoveryStream: () => ({ streamId: "", streamStillActive: false }),
  getPartialStreamText: () => ({ text: "", parts: [], hasSettledToolResults: false }),
  activeChatRecoveryRootRequestId: () => undefined,
  onGiveUpBookkeepingError: () => {},
});

async function stall(requestId, userMessageId) {
  const { incident } = await engine.beginIncident({
    requestId,
    recoveryRootRequestId: requestId,
    latestUserMessageId: userMessageId,
    recoveryKind: "continue",
    trigger: "stalled",
  });
  await engine.scheduleRecovery({ incident, recoveryKind: "continue", callback: "_chatRecoveryContinue", data: { incidentId: incident.incidentId } });
  return incident.incidentId;
}

const first = await stall("req-1", "u1"); // the first reply stalls: its recovery is scheduled
const second = await stall("req-2", "u2"); // the second message's reply stalls too: a second recovery is scheduled
await engine.updateIncident(first, "skipped", "conversation_changed"); // the first recovery stands down

const secondStatus = (await kv.get(`cf:chat-recovery:incident:${encodeURIComponent(second)}`))?.status;
const lastFrame = frames.at(-1);
const onConnect = await buildChatRecoveringFrame(kv, "cf_agent_chat_recovering", now);
console.log(`frames broadcast: ${frames.map((frame) => `recovering=${frame.recovering}`).join(", ")}`);
console.log(`second incident: ${secondStatus}; on-connect frame: ${onConnect ? "recovering" : "none"}`);

if (secondStatus === "scheduled" && (lastFrame?.recovering === false || onConnect === null)) {
  console.log("BUG: clients are told no recovery is under way while another incident's recovery is still scheduled");
  console.log(
    'contract: agents 0.32.0 dist/chat/index.d.ts:1731-1733 (buildChatRecoveringFrame): "A client that connects between recovery attempts (no active stream) reads the turn as working rather than frozen"; ' +
      ':1508-1510 (CHAT_RECOVERING_KEY): "Durable record of an in-progress recovery so a \'recovering…\' status (#1620) can be broadcast live"',
  );
  process.exit(1);
}
console.log("ok: the status stays while a recovery is scheduled");
