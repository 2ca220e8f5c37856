// The Node floor `turnsim bench` measures Node engines against: the SDK's
// protocol loop with no handler behind it (every input is taken and
// answered `idle`; nothing is stored, streamed or called). An engine built
// on the SDK costs at least this per run of the same scenario.
//
//   turnsim run scenarios/bench-standard-story.yaml --engine-cmd "node adapters/node/examples/noop.mjs"
//   (every scenario fails its expectations: this engine does nothing)

import { runEngine } from "../index.mjs";

// No module state: a generation after an eviction calls this again in place.
runEngine(() => ({}), { module: import.meta.url, moduleState: false });
