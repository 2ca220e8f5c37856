// The Node SDK for turnsim's engine protocol (docs/protocol.md).
//
// Import it before anything else: its first import installs the sandbox
// (virtual time, seeded randomness, console on stderr), and a library
// loaded earlier could keep the real `Date.now` or `setTimeout`.
//
//   import { runEngine } from "../node/index.mjs";
//   runEngine((host) => ({ userMessage(text) { ... } }));

import "./sandbox.mjs";

export { runEngine, Host, Connection, Chat, PostRefused, HookFailed, PROTOCOL_VERSION } from "./host.mjs";
export { clock, random } from "./sandbox.mjs";
export { Store, Write, apply as applyWrite } from "./store.mjs";
export { ModelProxy } from "./model.mjs";
export { cloneData } from "./clone.mjs";
export { aiSdkTools, isClientTool } from "./tools.mjs";
export * as chunks from "./chunks.mjs";
export * as messages from "./messages.mjs";
