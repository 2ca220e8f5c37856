// Runs the stories (stories.mjs) against the real Think, each `--repeat N`
// times, one at a time, and prints a table: runs, how many kept Think's
// contract, the rate, the median wall time of a run. A verdict is a rate:
// a story that fails one run of many is reported failing, never passing.
//
//   node adapters/cloudflare-think/stories/run.mjs [--repeat N] [--sample] [NAME ...]
//
// `--sample` runs the CI sample: the controls, which must keep the
// contract on every run, and one story Think deterministically breaks, which must fail on
// every run (a story that cannot fail proves nothing). Exit: 0 when every
// story met that, 1 when one did not, 2 on a story name that does not exist.
// Without `--sample`, exit 1 when any run of any story broke the contract.
import { parseArgs } from "node:util";
import { STORIES } from "./stories.mjs";

const SAMPLE = ["simple-turn", "client-tool-round-trip", "stall-recovers-with-a-terminal-frame", "duplicate-result-after-the-continuation"];
const RUN_LIMIT_MS = 90_000; // a run that takes longer is a hang: reported, never waited on forever

const { values, positionals } = parseArgs({
  options: { repeat: { type: "string", default: "1" }, sample: { type: "boolean", default: false }, verbose: { type: "boolean", default: false } },
  allowPositionals: true
});
const repeat = Number(values.repeat);
const names = values.sample ? SAMPLE : positionals.length > 0 ? positionals : STORIES.map((story) => story.name);
const unknown = names.filter((name) => !STORIES.some((story) => story.name === name));
if (unknown.length > 0 || !(repeat >= 1)) {
  console.error(unknown.length > 0 ? `unknown story: ${unknown.join(", ")} (known: ${STORIES.map((s) => s.name).join(", ")})` : `--repeat must be 1 or more`);
  process.exit(2);
}

async function runOnce(story) {
  const started = Date.now();
  let timer;
  const limit = new Promise((resolve) => (timer = setTimeout(() => resolve({ ok: false, detail: `no verdict within ${RUN_LIMIT_MS / 1000} s` }), RUN_LIMIT_MS)));
  try {
    const result = await Promise.race([story.run().catch((error) => ({ ok: false, error: true, detail: `harness error: ${error.message}` })), limit]);
    return { ...result, ms: Date.now() - started };
  } finally {
    clearTimeout(timer);
  }
}

const rows = [];
for (const name of names) {
  const story = STORIES.find((candidate) => candidate.name === name);
  const results = [];
  for (let index = 0; index < repeat; index++) {
    const result = await runOnce(story);
    results.push(result);
    console.log(`${name} #${index + 1}: ${result.na ? "N/A" : result.ok ? "kept" : "BROKE"} in ${(result.ms / 1000).toFixed(1)} s: ${result.detail}`);
  }
  rows.push({ story, results });
}

const median = (numbers) => numbers.sort((a, b) => a - b)[Math.floor(numbers.length / 2)];
console.log(`\n| story | mirrors | runs | kept | rate | median wall |\n|---|---|---|---|---|---|`);
for (const { story, results } of rows) {
  const judged = results.filter((result) => !result.na);
  const kept = judged.filter((result) => result.ok).length;
  const rate = judged.length === 0 ? "N/A" : `${((100 * kept) / judged.length).toFixed(0)} %`;
  console.log(`| ${story.name} | ${story.mirrors} | ${judged.length}${judged.length < results.length ? ` (+${results.length - judged.length} N/A)` : ""} | ${kept} | ${rate} | ${(median(results.map((r) => r.ms)) / 1000).toFixed(1)} s |`);
}

const broke = (row) => row.results.some((result) => !result.ok && !result.na);
const harnessErrors = rows.filter((row) => row.results.some((result) => result.error));
const failing = values.sample
  ? rows.filter((row) => (row.story.breaks ? row.results.some((result) => result.ok) : broke(row)) || harnessErrors.includes(row))
  : rows.filter(broke);
const summary = `${rows.length - failing.length} passed, ${failing.length} failed`;
console.log(`\nstories: ${summary}${values.sample ? " (the sample: the controls keep it, the broken story breaks it)" : ""}`);
process.exitCode = failing.length > 0 ? 1 : 0;
