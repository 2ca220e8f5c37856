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
// factory again), and the engine's own modules hold none (constants,
// functions and classes only; tests/cloudflare-agents.test.mjs keeps it so):
// the generation after an eviction calls the factory again too, after the
// SDK's reset, instead of evaluating these modules afresh. One process
// serves them all.
// The protocol's capabilities (docs/protocol.md) it implements: all but
// `provider-retries`. A 429/5xx after the stream started goes into Think's
// recovery (this app's `classifyChatError`), which keeps the partial, and a
// zero-token finish is stored as the answer: opencode's take-back-and-retry
// is the built-in engine's (docs/cloudflare-agents-findings.md, divergences).
const capabilities = ["recovery", "messenger", "store-refusal-fails-turn", "dangling-call-repair", "coalesce"];

runEngine((host) => new Session(host), { reinit: true, module: import.meta.url, moduleState: false, capabilities });
