// A recovery attempt whose provider never answers counts as forward
// progress, so the no-progress window, which agents documents as the
// primary stuck-turn bound, never seals a turn whose provider hangs at
// every attempt; only the transient-retry count ends it.
//
// The AI SDK's UI message stream emits a `start` chunk before the provider
// has answered at all. @cloudflare/think 0.23.0 stores every chunk of the
// turn's stream (`_storeChunkDurably`), and when the watchdog's stall is
// routed to recovery it completes the stream
// (`_completeResumableStream(streamId, "recovering")` → agents'
// `ResumableStream.complete` → `flushBuffer`), which appends the buffered
// `start` as one segment. The recovery progress marker
// (`ResumableStream.progressMarker`) counts segments, so the next stall's
// `beginIncident` sees the marker moved (`madeProgress`): the no-progress
// clock resets at every hung attempt.
//
// This script runs Think's call sequence for each stall
// (`_routeStallToBoundedRecovery`: `beginIncident` with trigger `stalled`,
// then `recordTransientRetry`, then the schedule) with agents' defaults
// (`resolveChatRecoveryConfig({})`: `maxAttempts` 10, a 5 minute
// no-progress window) and the stall timeout Think's docs suggest
// (`chatStreamStallTimeoutMs`, "e.g. `120_000`"), once as it happens (each
// hung attempt leaves its `start` segment) and once with attempts that
// store nothing, to show what the window would do.
//
// Run: node adapters/cloudflare-agents/repro/hung-attempt-counts-as-progress.mjs
// (from the turnsim repository, after `npm ci --prefix adapters`).
// Uses only the published `agents` and `ai` packages. Prints the contract
// it breaks and exits 1 while the bug shows, 0 once fixed.

import { ChatRecoveryEngine, resolveChatRecoveryConfig } from "agents/chat";
import { streamText } from "ai";
import { MockLanguageModelV4 } from "ai/test";

const STALL_TIMEOUT_MS = 120_000;

// 1. A provider that never answers: what reaches Think's stream log before the watchdog fires.
const model = new MockLanguageModelV4({
  doStream: ({ abortSignal }) => new Promise((_, reject) => abortSignal?.addEventListener("abort", () => reject(abortSignal.reason))),
});
const abort = new AbortController();
const result = streamText({ model, prompt: "continue", abortSignal: abort.signal, onError: () => {} });
const stored = [];
setTimeout(() => abort.abort(new Error("stalled")), 100);
try {
  for await (const chunk of result.toUIMessageStream({ onError: () => "stalled" })) if (chunk.type !== "error" && chunk.type !== "abort") stored.push(chunk.type);
} catch {}
console.log(`a call the provider never answered streamed: [${stored.join(", ")}] (Think stores each; completing the stream appends them as a segment)`);

/** One turn whose provider hangs at every attempt: the stall at which the incident is given up, and why. */
async function hungTurn(segmentsPerAttempt) {
  const storage = new Map();
  let progress = 1;
  let now = 1_000_000;
  const engine = new ChatRecoveryEngine({
    resolveConfig: () => resolveChatRecoveryConfig({}),
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
  for (let stall = 1; ; stall += 1) {
    now += STALL_TIMEOUT_MS; // the attempt (or the turn) hangs until the watchdog fires
    const { incident, exhausted } = await engine.beginIncident({
      requestId: "req-1",
      recoveryRootRequestId: "req-1",
      latestUserMessageId: "u1",
      recoveryKind: "continue",
      trigger: "stalled",
    });
    if (exhausted) return { stall, minutes: (stall * STALL_TIMEOUT_MS) / 60_000, reason: incident.reason };
    await engine.recordTransientRetry(incident.incidentId);
    progress += segmentsPerAttempt; // the hung attempt's stream completes: its chunks become a segment
  }
}

const actual = await hungTurn(stored.length > 0 ? 1 : 0);
const nothingStored = await hungTurn(0);
const line = (run) => `given up at stall ${run.stall}, after ${run.minutes} minutes (${run.reason})`;
console.log(`every hung attempt stores its [${stored.join(", ")}] segment: ${line(actual)}`);
console.log(`hung attempts that store nothing: ${line(nothingStored)}`);

if (actual.reason !== "no_progress_timeout") {
  console.log("BUG: attempts that produced nothing but a `start` chunk count as progress; the no-progress window never seals the turn");
  console.log(
    'contract: agents 0.32.0 dist/chat/index.d.ts:644-652 (ChatRecoveryConfig.noProgressTimeoutMs): "How long an incident may go WITHOUT forward progress before it is sealed ... This is the primary stuck-turn bound. ' +
      'It resets on every progress-bearing attempt, so a turn that keeps producing content is never sealed by this bound, while a genuinely idle turn is sealed within the window."',
  );
  process.exit(1);
}
console.log("ok: a hung provider is sealed by the no-progress window");
