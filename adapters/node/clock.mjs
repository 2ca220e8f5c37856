// The virtual clock: the only time an engine sees.
//
// Time is `now_ns`, the simulated nanoseconds since the run began, set from
// each input the harness sends. Timers are entries in a queue ordered by
// due time and then by creation order; nothing fires on its own. The host
// loop runs the timers that are due (`runNextDue`) while it settles an
// input, and reports the earliest one left in `idle` so that the harness
// sends `timer` when it comes.

/** One pending timer, shaped enough like Node's `Timeout` for library code. */
export class VirtualTimeout {
  /** @param {VirtualClock} clock @param {number} id */
  constructor(clock, id) {
    this._clock = clock;
    this._id = id;
    this._ref = true;
  }
  ref() {
    this._ref = true;
    return this;
  }
  unref() {
    // An unref'd timer still fires in virtual time: nothing else would
    // end the process between inputs anyway.
    this._ref = false;
    return this;
  }
  hasRef() {
    return this._ref;
  }
  refresh() {
    this._clock.refresh(this._id);
    return this;
  }
  close() {
    this._clock.clear(this._id);
    return this;
  }
  [Symbol.toPrimitive]() {
    return this._id;
  }
  [Symbol.dispose]() {
    this.close();
  }
}

export class VirtualClock {
  constructor() {
    /** Simulated nanoseconds since the run began (a BigInt-free integer: 2^53 ns is 104 days). */
    this.nowNs = 0;
    /** Wall-clock milliseconds at sim time zero (`init.wall_base_ms`). */
    this.wallBaseMs = 0;
    /** @type {Map<number, {id:number, dueNs:number, seq:number, delayNs:number, repeat:boolean, fn:Function, args:unknown[]}>} */
    this._timers = new Map();
    this._nextId = 1;
    this._nextSeq = 1;
  }

  /** A new run: time zero, no timers. */
  reset(wallBaseMs) {
    this.nowNs = 0;
    this.wallBaseMs = wallBaseMs;
    this._timers.clear();
  }

  /** Moves the clock to an input's time; it never goes back. */
  advanceTo(nowNs) {
    if (typeof nowNs === "number" && nowNs > this.nowNs) this.nowNs = nowNs;
  }

  /** `Date.now()`: whole wall-clock milliseconds. */
  wallMs() {
    return Math.floor(this.wallBaseMs + this.nowNs / 1e6);
  }

  /** `performance.now()`: fractional milliseconds since the run began. */
  monotonicMs() {
    return this.nowNs / 1e6;
  }

  /** @returns {number} the timer's id */
  set(fn, delayMs, args, repeat) {
    if (typeof fn !== "function") throw new TypeError("the callback must be a function");
    // Node's rule: a delay below 1 ms, above 2^31-1 ms or not a number is
    // 1 ms. Keeping it keeps library timing assumptions true.
    let ms = Number(delayMs);
    if (!(ms >= 1 && ms <= 2147483647)) ms = 1;
    const effectiveNs = Math.round(ms * 1e6);
    const id = this._nextId++;
    this._timers.set(id, {
      id,
      dueNs: this.nowNs + effectiveNs,
      seq: this._nextSeq++,
      delayNs: effectiveNs,
      repeat,
      fn,
      args,
    });
    return id;
  }

  clear(id) {
    this._timers.delete(typeof id === "object" && id !== null ? Number(id) : id);
  }

  refresh(id) {
    const timer = this._timers.get(id);
    if (!timer) return;
    timer.dueNs = this.nowNs + timer.delayNs;
    timer.seq = this._nextSeq++;
  }

  /** The earliest pending timer, or undefined. */
  _earliest() {
    let earliest;
    for (const timer of this._timers.values()) {
      if (!earliest || timer.dueNs < earliest.dueNs || (timer.dueNs === earliest.dueNs && timer.seq < earliest.seq)) {
        earliest = timer;
      }
    }
    return earliest;
  }

  /** When the engine wants to be woken next, in ns, or null. */
  nextDueNs() {
    const earliest = this._earliest();
    return earliest ? earliest.dueNs : null;
  }

  /** Runs the earliest timer if it is due now. Returns whether one ran. */
  runNextDue() {
    const timer = this._earliest();
    if (!timer || timer.dueNs > this.nowNs) return false;
    if (timer.repeat) {
      timer.dueNs += timer.delayNs;
      timer.seq = this._nextSeq++;
    } else {
      this._timers.delete(timer.id);
    }
    timer.fn(...timer.args);
    return true;
  }

  /** Pending timers (for tests and diagnostics). */
  get size() {
    return this._timers.size;
  }
}
