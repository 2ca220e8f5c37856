// A turn engine for turnsim built from the AI SDK's own chat machinery
// (`AbstractChat` from `ai`; see README.md for which decisions are the
// SDK's code and which are ours). Run it under the harness:
//
//   turnsim run scenarios/ --engine-cmd "node adapters/ai-sdk-chat/engine.mjs"

// The SDK first: it installs virtual time and seeded randomness before `ai` loads.
import { runEngine } from "../node/index.mjs";
import { readFileSync } from "node:fs";
import { Session } from "./session.mjs";

// What it implements of the protocol's capabilities (docs/protocol.md):
// capabilities.json is the one list, read here and declared at every `init`.
const listed = JSON.parse(readFileSync(new URL("./capabilities.json", import.meta.url), "utf8")).capabilities;
const capabilities = Object.keys(listed).filter((name) => listed[name] === true);

// Every piece of a run's state lives in the Session (a new run calls the
// factory again), and the generation after an eviction evaluates this
// module and the engine's own modules afresh: one process serves them all.
runEngine((host) => new Session(host), { reinit: true, module: import.meta.url, capabilities });
