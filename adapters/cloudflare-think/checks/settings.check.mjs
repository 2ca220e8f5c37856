// A scenario's config in Think's terms, and what Think cannot take.
import { test } from "node:test";
import assert from "node:assert/strict";
import { clientToolSchemas, thinkSettings, unsupported } from "../settings.mjs";

test("tools go where Think takes them", () => {
  const config = { tools: { a: "server", b: "approval", c: "client_approval", d: "client", e: "human", f: "dynamic" } };
  assert.deepEqual(thinkSettings(config).serverTools, {
    a: { needsApproval: false, execute: true },
    b: { needsApproval: true, execute: true },
    c: { needsApproval: true, execute: false },
    f: { needsApproval: false, execute: true, dynamic: true }
  });
  assert.deepEqual(clientToolSchemas(config).map((tool) => tool.name), ["d", "e"]);
});

test("the knobs are Think's names for the scenario's settings", () => {
  const settings = thinkSettings({ stall_timeout_ms: 1500, max_steps: 4, recovery: { max_attempts: 3, stable_timeout_ms: 2000, no_progress_window_ms: 9000, terminal_message: "x" } });
  assert.equal(settings.stallTimeoutMs, 1500);
  assert.equal(settings.maxSteps, 4);
  assert.deepEqual(settings.recovery, { maxAttempts: 3, stableTimeoutMs: 2000, noProgressTimeoutMs: 9000, terminalMessage: "x" });
});

test("Think's constants make a scenario that sets them otherwise not applicable", () => {
  assert.deepEqual(unsupported({ coalesce_ms: 50, recovery: { alarm_debounce_ms: 30000, stable_retry_delay_ms: 3000 } }), []);
  const reasons = unsupported({ coalesce_ms: 10, recovery: { enabled: false, alarm_debounce_ms: 5000 }, dynamic_tools: ["m"] });
  assert.equal(reasons.length, 4, reasons.join("; "));
});
