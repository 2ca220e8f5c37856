//! The resume race, without turnsim: Think 0.23.0 in workerd, a reply cut
//! by SIGKILL mid-stream, workerd restarted on the same disk, and a client
//! that reconnects as `useAgentChat` does (it asks whether a stream can be
//! resumed, and acks the offer at once). Some runs, Think's recovery of the
//! interrupted turn is skipped and the turn is abandoned: no model call
//! after the kill, no terminal frame, the partial stored `streaming` for
//! good. Prints one line per run and the rate; exits 1 when any run was
//! abandoned, 0 when none was.
//!
//!   node adapters/cloudflare-think/repro/resume-race.mjs [--runs N] [--kills K] [--client probe|silent]
//!
//! Each run kills workerd K times (default 2), each time once the model
//! call under way (the turn, then each recovery) has streamed four words.
//!
//! `--client silent` reconnects without asking (no probe, no ack): the
//! control, where recovery is expected to run every time.
import { parseArgs } from "node:util";
import { ThinkRun } from "../think.mjs";
import { startProvider } from "./provider.mjs";

const { values } = parseArgs({ options: { runs: { type: "string", default: "10" }, kills: { type: "string", default: "2" }, client: { type: "string", default: "probe" }, verbose: { type: "boolean", default: false } } });
const RUNS = Number(values.runs);
const KILLS = Number(values.kills);
const OBSERVE_MS = 12_000;

const words = Array.from({ length: 20 }, (_, index) => ({ text: `w${index} `, then: { waitMs: 300 } }));
const longAnswer = words.flatMap(({ text, then }) => [{ text }, then]).concat({ finish: "stop" });
const shortAnswer = [{ text: "Recovered." }, { finish: "stop" }];

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(condition, timeoutMs) {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (condition()) return true;
    await sleep(20);
  }
  return false;
}

/** Kills workerd once the current model call has streamed four words, restarts it, and reconnects a client. */
async function killMidStream(run, provider, call) {
  if (!(await waitFor(() => provider.requests.length > call, 15_000))) return false;
  await sleep(provider.requests[call].atMs + 4 * 300 + 100 - Date.now());
  await run.evict();
  return true;
}

/** A client as useAgentChat reconnects: with `--client probe` it asks to resume and acks the offer at once. */
async function reconnect(run, name, frames) {
  const client = await run.connect(name, {
    onFrame: (frame) => {
      frames.push(frame);
      if (frame.StreamResuming) client.resumeAck(frame.StreamResuming.request_id);
    }
  });
  if (values.client === "probe") client.resumeRequest();
  return client;
}

async function oneRun(index) {
  const provider = await startProvider([...Array(KILLS).fill(longAnswer), shortAnswer]);
  const config = { tools: {}, stall_timeout_ms: 1500, recovery: { max_attempts: 3, stable_timeout_ms: 2000 } };
  const run = new ThinkRun({ config, providerAddress: provider.address, toolsAddress: provider.address, onLog: values.verbose ? console.error : () => {} });
  try {
    await run.start();
    const first = await run.connect("c0", { onFrame: () => {} });
    first.userMessage("Tell me a long story");
    let frames = [];
    let kills = 0;
    while (kills < KILLS && (await killMidStream(run, provider, kills))) {
      kills++;
      frames = [];
      await reconnect(run, `c${kills}`, frames);
    }
    const callsAtLastKill = provider.requests.length;
    const terminal = () => frames.some((frame) => frame.Done || frame.Error);
    await waitFor(terminal, OBSERVE_MS);
    await sleep(300);
    const calls = provider.requests.length - callsAtLastKill;
    const last = run.store().messages.at(-1);
    const streaming = last?.parts.some((part) => part.state === "streaming") ?? false;
    const outcome = kills < KILLS ? "other" : calls === 0 && !terminal() && streaming ? "abandoned" : terminal() && !streaming ? "recovered" : "other";
    console.log(`run ${index + 1}: ${outcome} (kills: ${kills}; model calls after the last kill: ${calls}; terminal frame: ${terminal()}; stored partial streaming: ${streaming})`);
    return outcome;
  } finally {
    await run.stop();
    await provider.close();
  }
}

const outcomes = [];
for (let index = 0; index < RUNS; index++) outcomes.push(await oneRun(index));
const abandoned = outcomes.filter((outcome) => outcome === "abandoned").length;
console.log(`abandoned: ${abandoned} of ${RUNS} (client: ${values.client}, kills: ${KILLS}); recovered: ${outcomes.filter((o) => o === "recovered").length}; other: ${outcomes.filter((o) => o === "other").length}`);
process.exitCode = abandoned > 0 ? 1 : 0;
