// The engine's processes, ports and directories. An engine process is a
// child of the bridge in the bridge's own process group: the harness kills
// that whole group at an eviction (SIGKILL, nothing survives: not the
// engine, not a tool's child), and the next generation's bridge starts the
// engine again on the same data. Its output goes to a log file in the
// run's scratch directory; its last lines go to the bridge's stderr (which
// the harness shows with a failure) when it dies or fails to start.
//
// The scratch directory holds everything of one run that must outlive a
// generation (the engine's data, its config, its logs): the harness's
// (`init.scratch_dir`, removed by the harness when the run ends), or, from
// a harness that gives none, one the bridge makes and names in the store
// (an opaque `live/scratch` entry, so the next generation finds it) and
// removes when the run ends (SIGTERM).

import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, closeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

/** The opaque store entry naming a scratch directory the bridge made. */
export const SCRATCH_KEY = "live/scratch";

/** The run's scratch directory: `{path, owned, fresh}` (`owned`: the bridge removes it; `fresh`: made now). */
export function scratchDirectory(init) {
  if (typeof init.scratch_dir === "string" && init.scratch_dir.length > 0) {
    mkdirSync(init.scratch_dir, { recursive: true });
    return { path: init.scratch_dir, owned: false, fresh: false };
  }
  const named = init.state?.extra?.[SCRATCH_KEY];
  if (typeof named === "string" && named.length > 0) {
    mkdirSync(named, { recursive: true });
    return { path: named, owned: true, fresh: false };
  }
  return { path: mkdtempSync(join(tmpdir(), "turnsim-live-")), owned: true, fresh: true };
}

export function removeDirectory(path) {
  try {
    rmSync(path, { recursive: true, force: true, maxRetries: 3 });
  } catch {
    // Best effort: a run's leftovers must not fail its verdict.
  }
}

/** A port nobody listens on now (the engine binds it right after). */
export async function freePort() {
  const server = createServer();
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** One engine process, logging to `logPath`. */
export class EngineProcess {
  constructor(command, args, { env, cwd, logPath }) {
    this.logPath = logPath;
    const log = openSync(logPath, "a");
    this.child = spawn(command, args, { env, cwd, stdio: ["ignore", log, log] });
    closeSync(log);
    this.exited = null;
    this.child.on("exit", (code, signal) => {
      this.exited = { code, signal };
    });
    this.child.on("error", (error) => {
      this.exited = { code: null, signal: null, error: error.message };
    });
  }

  alive() {
    return this.exited === null;
  }

  /** SIGKILL: what an eviction does to an engine. */
  kill() {
    if (this.alive()) this.child.kill("SIGKILL");
  }

  /** The log's last `lines` lines. */
  tail(lines = 40) {
    try {
      return readFileSync(this.logPath, "utf8").split("\n").slice(-lines).join("\n");
    } catch {
      return "";
    }
  }
}

/**
 * Calls `probe()` until it resolves true, each try bounded by `tryMs` (an
 * engine that accepts connections before it serves them can hang a first
 * request for good), for at most `totalMs`. Throws with `what` on timeout
 * or when `process` died.
 */
export async function waitUntilReady(probe, { what, process, tryMs = 500, totalMs = 60_000, pauseMs = 50 }) {
  const deadline = performance.now() + totalMs;
  while (performance.now() < deadline) {
    if (process && !process.alive()) throw new Error(`${what}: the engine exited (${JSON.stringify(process.exited)})\n${process.tail()}`);
    const ready = await withTimeout(probe(), tryMs).catch(() => false);
    if (ready) return;
    await sleep(pauseMs);
  }
  throw new Error(`${what}: not ready after ${totalMs} ms${process ? `\n${process.tail()}` : ""}`);
}

/** `promise`, or a rejection after `ms`. */
export function withTimeout(promise, ms) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
