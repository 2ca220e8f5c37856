// A scenario's engine config (`EngineConfig`, engine/src/config.rs) in
// Think's terms: the settings app/think-agent.js reads from its
// TURNSIM_SETTINGS binding, and the settings Think cannot take.
//
// | turnsim | Think 0.23.0 |
// |---|---|
// | `stall_timeout_ms` | `chatStreamStallTimeoutMs` (0: off, both) |
// | `recovery.max_attempts`, `stable_timeout_ms`, `no_progress_window_ms`, `terminal_message` | `chatRecovery.maxAttempts`, `stableTimeoutMs`, `noProgressTimeoutMs`, `terminalMessage` |
// | `max_steps` | `maxSteps` |
// | `tools`: `server`, `approval`, `client_approval` | `getTools()`: an `execute` that calls the runner (none for `client_approval`), `needsApproval` for the last two |
// | `tools`: `client`, `human` | the request's `clientTools` |
// | (a story's `dynamic`) | `getTools()`: the AI SDK's `dynamicTool` with an `execute` that calls the runner |
//
// `keepAliveIntervalMs` (Agent's `static options`, how soon a killed object
// wakes with no client) is the runner's: 2 s, so a run's restart recovers
// within its horizon.
//
// What Think fixes and a scenario may set otherwise (`unsupported`): its
// recovery cannot be switched off (agents' `resolveChatRecoveryConfig`:
// "Durable recovery is always enabled"), its coalesce window is
// `COALESCE_MS = 50`, its recovery-alarm debounce 30 s and its retry of a
// recovery that found no stable state 3 s (`CHAT_RECOVERY_ALARM_DEBOUNCE_MS`,
// `CHAT_RECOVERY_STABLE_RETRY_DELAY_SECONDS`), and a scenario's per-turn
// stall timeout reaches Think only through `beforeTurn`, which this app
// does not take from the client. A scenario that sets one of these needs
// `dynamic-tools` or `engine-settings`, which the driver says Think lacks,
// so the harness reports it not applicable (docs/protocol.md).

export const KEEP_ALIVE_INTERVAL_MS = 2000;

/** Think's constants, and the reference defaults that equal them. */
const FIXED = {
  coalesce_ms: 50,
  "recovery.alarm_debounce_ms": 30_000,
  "recovery.stable_retry_delay_ms": 3_000
};

/** The settings the app reads, for a scenario's `EngineConfig`. */
export function thinkSettings(config) {
  const serverTools = {};
  for (const [name, kind] of Object.entries(config.tools ?? {})) {
    if (kind === "server") serverTools[name] = { needsApproval: false, execute: true };
    if (kind === "approval") serverTools[name] = { needsApproval: true, execute: true };
    if (kind === "client_approval") serverTools[name] = { needsApproval: true, execute: false };
    if (kind === "dynamic") serverTools[name] = { needsApproval: false, execute: true, dynamic: true };
  }
  const recovery = config.recovery ?? {};
  return {
    stallTimeoutMs: config.stall_timeout_ms ?? 0,
    recovery: {
      maxAttempts: recovery.max_attempts ?? 10,
      stableTimeoutMs: recovery.stable_timeout_ms ?? 10_000,
      noProgressTimeoutMs: recovery.no_progress_window_ms ?? 300_000,
      terminalMessage: recovery.terminal_message ?? "The assistant was interrupted and could not recover. Please try again."
    },
    keepAliveIntervalMs: KEEP_ALIVE_INTERVAL_MS,
    maxSteps: config.max_steps ?? 16,
    serverTools
  };
}

/** The client tools' schemas, sent with every request as `clientTools`. */
export function clientToolSchemas(config) {
  return Object.entries(config.tools ?? {})
    .filter(([, kind]) => kind === "client" || kind === "human")
    .map(([name]) => ({ name, description: `the scenario's client tool ${name}`, parameters: { type: "object" } }));
}

/** Why Think cannot run a scenario with this config: one line per setting, empty when it can. */
export function unsupported(config) {
  const reasons = [];
  if (config.recovery && config.recovery.enabled === false) reasons.push("recovery.enabled: false (Think's recovery is always on)");
  for (const [key, value] of Object.entries(FIXED)) {
    const set = key.split(".").reduce((at, name) => at?.[name], config);
    if (set !== undefined && set !== value) reasons.push(`${key}: ${set} (Think's is ${value})`);
  }
  if ((config.dynamic_tools ?? []).length > 0) reasons.push("dynamic_tools (the app defines every tool statically)");
  return reasons;
}
