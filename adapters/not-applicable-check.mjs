// Checks a `turnsim run --not-applicable only --format json` report (on
// stdin) against an engine's triaged list: every violation a scenario that
// does not apply shows, outside what its missing capabilities explain,
// must be a (scenario, check) pair the list names, each triaged in the
// engine's findings doc as something other than the glue. Anything else is
// a glue bug hiding behind "not applicable", and fails.
//
//   turnsim run scenarios/ --not-applicable only --format json --engine-cmd "node adapters/X/engine.mjs" \
//     | node adapters/not-applicable-check.mjs adapters/X/not-applicable-triaged.txt
//
// The list: one `scenarios/NAME.yaml check-id` a line; `#` starts a comment.
// Exit 0: runs were made and nothing untriaged failed; 1: something did;
// 2: no report, or a report of no runs (a green run on nothing is a lie).

import { readFileSync } from "node:fs";

const [listPath] = process.argv.slice(2);
if (!listPath) fail(2, "usage: node adapters/not-applicable-check.mjs TRIAGED_LIST < report.json");

const triaged = new Set(
  readFileSync(listPath, "utf8")
    .split("\n")
    .map((line) => line.replace(/#.*/, "").trim())
    .filter(Boolean)
    .map((line) => line.split(/\s+/).join(" ")),
);
let report;
try {
  report = JSON.parse(readFileSync(0, "utf8"));
} catch (error) {
  fail(2, `no JSON report on stdin (${error.message}): did turnsim run?`);
}
if (!(report.runs > 0)) fail(2, `the report holds no runs: ${JSON.stringify(report).slice(0, 200)}`);

const untriaged = report.failures.filter((failure) => !triaged.has(`${failure.scenario} ${failure.check}`));
const seen = new Set(report.failures.map((failure) => `${failure.scenario} ${failure.check}`));
for (const failure of untriaged) console.log(`UNTRIAGED ${failure.scenario} seed ${failure.seed}: ${failure.check}: ${failure.message}\n  ${failure.replay}`);
for (const pair of triaged) if (!seen.has(pair)) console.log(`note: ${pair} (triaged) did not fail on these seeds`);
console.log(
  `not applicable, run anyway: ${report.scenarios} scenarios, ${report.runs} runs, ${report.failed} failed; ` +
    `${untriaged.length} violations untriaged (${listPath})`,
);
process.exit(untriaged.length === 0 ? 0 : 1);

function fail(code, message) {
  console.error(`not-applicable-check: ${message}`);
  process.exit(code);
}
