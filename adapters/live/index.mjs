// The live runner's bridge library: run a real engine in real time behind
// turnsim's engine protocol. `runBridge(makeDriver)` is the entry; the
// rest are the pieces a driver may use (README.md documents the driver
// interface).

export { runBridge } from "./bridge.mjs";
export { EventStream, httpJson } from "./event-stream.mjs";
export { freePort, waitUntilReady, withTimeout } from "./processes.mjs";
export { requestMessages, textOf } from "./openai.mjs";
export { SseRenderer } from "./sse.mjs";
