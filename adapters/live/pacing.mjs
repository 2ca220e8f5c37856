// Real time against the harness's time. Every input carries `now_ns`, the
// sim time since the run began; a live engine's clock is the machine's, so
// the bridge holds each input back until as much real time has passed
// since the run began, then delivers it. While the engine may still act on
// its own (a request open, a turn running, a retry waiting), the bridge
// asks to be woken a tick later, so what it saw is reported within a tick
// of when it happened. When the engine is at rest, time it would only
// spend waiting for the world's next move is skipped: the next input is
// delivered at once, and the sim clock runs ahead of the wall clock by
// what was skipped (`TURNSIM_LIVE_SKIP_REST=0` waits it out instead).
//
// Start-up is not sim time: the mapping starts when `init` is answered, so
// an engine that takes seconds to start (or restart, after an eviction)
// does so between two instants of sim time.

import { setTimeout as sleep } from "node:timers/promises";

/** The tick while the engine is busy, in milliseconds (`TURNSIM_LIVE_TICK_MS`). */
export const DEFAULT_TICK_MS = 5;

export class Pacing {
  constructor({ tickMs = numberFromEnv("TURNSIM_LIVE_TICK_MS", DEFAULT_TICK_MS), skipRest = process.env.TURNSIM_LIVE_SKIP_REST !== "0" } = {}) {
    this.tickNs = Math.max(1, Math.round(tickMs * 1e6));
    this.skipRest = skipRest;
    /** Real time (ms, monotonic) that sim time `simOriginNs` maps to. */
    this.realOriginMs = 0;
    this.simOriginNs = 0;
    /** The last `idle` said the engine was at rest. */
    this.atRest = false;
    /** The most an input was delivered after its time, in ms (a slow bridge or machine). */
    this.lateMsMax = 0;
    /** Sim time skipped at rest, in ms. */
    this.skippedMs = 0;
  }

  /** Sim time `nowNs` is now (called when `init` is answered). */
  start(nowNs) {
    this.realOriginMs = performance.now();
    this.simOriginNs = nowNs;
    this.atRest = false;
  }

  /** The real time (ms) sim time `nowNs` maps to. */
  realMs(nowNs) {
    return this.realOriginMs + (nowNs - this.simOriginNs) / 1e6;
  }

  /** Waits until real time reaches `nowNs` (or skips ahead, at rest). */
  async until(nowNs) {
    const ahead = this.realMs(nowNs) - performance.now();
    if (ahead <= 0) {
      this.lateMsMax = Math.max(this.lateMsMax, -ahead);
      return;
    }
    if (this.atRest && this.skipRest) {
      this.realOriginMs -= ahead;
      this.skippedMs += ahead;
      return;
    }
    await sleep(ahead);
  }

  /** The `next_timer_ns` of an `idle` at `nowNs`: a tick away while the engine is busy, none at rest. */
  nextTimer(nowNs, busy) {
    this.atRest = !busy;
    return busy ? nowNs + this.tickNs : null;
  }
}

function numberFromEnv(name, fallback) {
  const value = Number(process.env[name]);
  return Number.isFinite(value) && value > 0 ? value : fallback;
}
