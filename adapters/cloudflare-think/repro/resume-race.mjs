// The resume race, without turnsim: Think 0.23.0 in workerd, a reply cut
// by SIGKILL mid-stream, workerd restarted on the same disk, and a client
// that reconnects as `useAgentChat` does (it asks whether a stream can be
// resumed, and acks the offer at once). Some runs, Think's recovery of the
// interrupted turn is skipped and the turn is abandoned: no model call
// after the kill, no terminal frame, the partial stored `streaming` for
// good. Prints one line per run and the rate; exits 1 when any run was
// abandoned, 0 when none was.
//
//   node adapters/cloudflare-think/repro/resume-race.mjs [--runs N] [--kills K] [--client probe|silent]
//
// Each run kills workerd K times (default 2), each time once the model
// call under way (the turn, then each recovery) has streamed four words,
// and restarts it after --down-ms (default 300) with no process.
//
// `--client silent` reconnects without asking (no probe, no ack): the
// control, where recovery is expected to run every time.
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { ThinkRun } from "../think.mjs";
import { startProvider } from "./provider.mjs";

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
async function killMidStream(run, provider, call, downMs) {
  if (!(await waitFor(() => provider.requests.length > call, 15_000))) return false;
  await sleep(provider.requests[call].atMs + 4 * 300 + 100 - Date.now());
  await run.evict({ downMs });
  return true;
}

/** A client as useAgentChat reconnects: with `--client probe` it asks to resume and acks the offer at once. */
async function reconnect(run, name, frames, mode) {
  const client = await run.connect(name, {
    onFrame: (frame) => {
      frames.push(frame);
      if (frame.StreamResuming) client.resumeAck(frame.StreamResuming.request_id);
    }
  });
  if (mode === "probe") client.resumeRequest();
  return client;
}

/**
 * One run: `kills` SIGKILLs mid-stream, each followed by a reconnect.
 * Returns `{ name, detail }`: "abandoned" when no model call came after the
 * last kill (recovery never asked the model again), "recovered" when one
 * came and the stored reply is settled with a terminal frame, else "other".
 */
export async function resumeRace({ kills: wanted = 2, client = "probe", downMs = 300, keepAliveIntervalMs, onLog = () => {} } = {}) {
  const provider = await startProvider([...Array(wanted).fill(longAnswer), shortAnswer]);
  const config = { tools: {}, stall_timeout_ms: 1500, recovery: { max_attempts: 3, stable_timeout_ms: 2000 } };
  const run = new ThinkRun({ config, providerAddress: provider.address, toolsAddress: provider.address, onLog, keepAliveIntervalMs });
  try {
    await run.start();
    const first = await run.connect("c0", { onFrame: () => {} });
    first.userMessage("Tell me a long story");
    let frames = [];
    let kills = 0;
    while (kills < wanted && (await killMidStream(run, provider, kills, downMs))) {
      kills++;
      frames = [];
      await reconnect(run, `c${kills}`, frames, client);
    }
    const callsAtLastKill = provider.requests.length;
    const terminal = () => frames.some((frame) => frame.Done || frame.Error);
    await waitFor(() => terminal() && provider.requests.length > callsAtLastKill, OBSERVE_MS);
    await sleep(300);
    const calls = provider.requests.length - callsAtLastKill;
    const last = run.store().messages.at(-1);
    const streaming = last?.parts.some((part) => part.state === "streaming") ?? false;
    const name = kills < wanted ? "other" : calls === 0 ? "abandoned" : terminal() && !streaming ? "recovered" : "other";
    return { name, detail: `kills ${kills}; model calls after the last kill ${calls}; terminal frame ${terminal()}; stored reply streaming ${streaming}` };
  } finally {
    await run.stop();
    await provider.close();
  }
}

async function main() {
  const options = {
    runs: { type: "string", default: "10" },
    kills: { type: "string", default: "2" },
    "down-ms": { type: "string", default: "300" },
    client: { type: "string", default: "probe" },
    "keep-alive-ms": { type: "string", default: "2000" },
    verbose: { type: "boolean", default: false }
  };
  const { values } = parseArgs({ options });
  const RUNS = Number(values.runs);
  const KILLS = Number(values.kills);
  const outcomes = [];
  for (let index = 0; index < RUNS; index++) {
    const outcome = await resumeRace({ kills: KILLS, client: values.client, downMs: Number(values["down-ms"]), keepAliveIntervalMs: Number(values["keep-alive-ms"]), onLog: values.verbose ? console.error : () => {} });
    console.log(`run ${index + 1}: ${outcome.name} (${outcome.detail})`);
    outcomes.push(outcome.name);
  }
  const count = (name) => outcomes.filter((outcome) => outcome === name).length;
  console.log(`abandoned: ${count("abandoned")} of ${RUNS} (client: ${values.client}, kills: ${KILLS}); recovered: ${count("recovered")}; other: ${count("other")}`);
  process.exitCode = count("abandoned") > 0 ? 1 : 0;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
