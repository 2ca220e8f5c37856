// A turn engine for turnsim built from Cloudflare's published `agents`
// package (see README.md for which decisions are Cloudflare's code and
// which are ours). Run it under the harness:
//
//   turnsim run scenarios/ --engine-cmd "node adapters/cloudflare-agents/engine.mjs"

// The SDK first: it installs virtual time and seeded randomness before
// `agents` and `ai` load.
import { runEngine } from "../node/index.mjs";
import { Session } from "./session.mjs";

// Every piece of a run's state lives in the Session (a new run calls the
// factory again), and the generation after an eviction evaluates this
// module and the engine's own modules afresh: one process serves them all.
runEngine((host) => new Session(host), { reinit: true, module: import.meta.url });
