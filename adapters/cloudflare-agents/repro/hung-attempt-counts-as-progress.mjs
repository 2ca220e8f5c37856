// A recovery attempt whose provider never answers still counts as
// progress, so the no-progress window never closes on a provider that
// hangs at every attempt.
//
// The AI SDK's UI message stream emits a `start` chunk before the provider
// has answered at all. @cloudflare/think 0.23.0 stores every chunk of the
// turn's stream (`_storeChunkDurably`), and when the stall is routed to
// recovery it completes the stream (`_completeResumableStream(streamId,
// "recovering")` → agents' `ResumableStream.complete` → `flushBuffer`),
// which appends the buffered `start` as one segment. The recovery progress
// marker (`ResumableStream.progressMarker`) counts segments, so the next
// stall's `beginIncident` sees the marker moved: the attempt count and the
// no-progress clock reset (`madeProgress`).
//
// This script shows both halves with the published packages: what a hung
// call streams (with `ai`), and what the engine makes of one more segment
// per attempt (with agents' `ChatRecoveryEngine`, a 20 s no-progress
// window, attempts 3 s apart for ten minutes).
//
// Run: node adapters/cloudflare-agents/repro/hung-attempt-counts-as-progress.mjs
// (from the turnsim repository, after `npm ci --prefix adapters`).
// Exits 1 while the bug shows, 0 once fixed.

import { ChatRecoveryEngine, resolveChatRecoveryConfig } from "agents/chat";
import { streamText } from "ai";
import { MockLanguageModelV4 } from "ai/test";

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

// 2. The engine, given one more segment per hung attempt.
const storage = new Map();
let progress = 1;
let now = 1_000_000;
const engine = new ChatRecoveryEngine({
  resolveConfig: () => resolveChatRecoveryConfig({ maxAttempts: 1000, noProgressTimeoutMs: 20_000 }),
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
let exhaustedAt = null;
let stalls = 0;
for (let elapsed = 0; elapsed <= 600_000; elapsed += 3_000) {
  now = 1_000_000 + elapsed;
  const { exhausted } = await engine.beginIncident({ requestId: "req-1", recoveryRootRequestId: "req-1", latestUserMessageId: "u1", recoveryKind: "continue", trigger: "stalled" });
  stalls += 1;
  if (exhausted) {
    exhaustedAt = elapsed;
    break;
  }
  if (stored.length > 0) progress += 1; // the hung attempt's own chunks, appended when its stream completes
}
console.log(exhaustedAt === null ? `after ${stalls} hung attempts over ten minutes the incident is still recovering` : `given up after ${exhaustedAt / 1000} s`);

if (stored.length > 0 && exhaustedAt === null) {
  console.log("BUG: attempts that produced nothing count as progress; the 20 s no-progress window never closes");
  process.exit(1);
}
console.log("ok: a hung provider exhausts the no-progress window");
