// The sandbox: replaces every source of time and randomness an engine (and
// the libraries it loads) could read with the run's virtual clock and seeded
// generator, and moves console output off stdout (stdout is the protocol).
//
// It installs itself when first imported, so the SDK's entry module imports
// it before anything else; an engine imports the SDK before any library
// that could capture `Date.now` or `setTimeout` at load time. Until `init`
// arrives the generator runs on seed 0 and the clock at zero, so even work
// done at module load is the same every run.

import { syncBuiltinESMExports } from "node:module";
import * as nodeCrypto from "node:crypto";
import * as nodeTimers from "node:timers";
import * as nodeTimersPromises from "node:timers/promises";
import { performance } from "node:perf_hooks";
import { VirtualClock, VirtualTimeout } from "./clock.mjs";
import { SeededRandom } from "./random.mjs";

export const clock = new VirtualClock();
export const random = new SeededRandom(0n);

const realSetImmediate = globalThis.setImmediate;
const realClearImmediate = globalThis.clearImmediate;
const RealDate = globalThis.Date;

let immediatesPending = 0;

/** One turn of the real event loop: every microtask queued so far runs first. */
export function macrotaskTurn() {
  return new Promise((resolve) => realSetImmediate(resolve));
}

/** Immediates the engine queued that have not run yet. */
export function pendingImmediates() {
  return immediatesPending;
}

function installTimers() {
  const setTimeoutVirtual = (fn, delay, ...args) => new VirtualTimeout(clock, clock.set(fn, delay, args, false));
  const setIntervalVirtual = (fn, delay, ...args) => new VirtualTimeout(clock, clock.set(fn, delay, args, true));
  const clearVirtual = (timer) => {
    if (timer !== undefined && timer !== null) clock.clear(Number(timer));
  };
  const setImmediateCounted = (fn, ...args) => {
    immediatesPending++;
    let ran = false;
    const handle = realSetImmediate(() => {
      ran = true;
      immediatesPending--;
      fn(...args);
    });
    const realClear = handle;
    handle._turnsimCancel = () => {
      if (!ran) {
        ran = true;
        immediatesPending--;
        realClearImmediate(realClear);
      }
    };
    return handle;
  };
  const clearImmediateCounted = (handle) => {
    if (handle && handle._turnsimCancel) handle._turnsimCancel();
    else if (handle) realClearImmediate(handle);
  };
  const replacements = {
    setTimeout: setTimeoutVirtual,
    clearTimeout: clearVirtual,
    setInterval: setIntervalVirtual,
    clearInterval: clearVirtual,
    setImmediate: setImmediateCounted,
    clearImmediate: clearImmediateCounted,
  };
  Object.assign(globalThis, replacements);
  Object.assign(nodeTimers.default ?? nodeTimers, replacements);
  const promises = nodeTimersPromises.default ?? nodeTimersPromises;
  promises.setTimeout = (delay, value, options = {}) => sleepVirtual(delay, value, options.signal);
  promises.setImmediate = (value) => new Promise((resolve) => setImmediateCounted(resolve, value));
  promises.scheduler = { wait: (delay, options = {}) => sleepVirtual(delay, undefined, options.signal), yield: () => promises.setImmediate() };
  AbortSignal.timeout = (delay) => {
    const controller = new AbortController();
    setTimeoutVirtual(() => controller.abort(new DOMException("The operation was aborted due to timeout", "TimeoutError")), delay);
    return controller.signal;
  };
}

function sleepVirtual(delay, value, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = globalThis.setTimeout(() => resolve(value), delay);
    signal?.addEventListener("abort", () => {
      globalThis.clearTimeout(timer);
      reject(signal.reason);
    });
  });
}

function installDate() {
  const VirtualDate = new Proxy(RealDate, {
    construct(target, args, newTarget) {
      return Reflect.construct(target, args.length === 0 ? [clock.wallMs()] : args, newTarget);
    },
    apply() {
      return new RealDate(clock.wallMs()).toString();
    },
    get(target, property, receiver) {
      if (property === "now") return () => clock.wallMs();
      return Reflect.get(target, property, receiver);
    },
  });
  globalThis.Date = VirtualDate;
  performance.now = () => clock.monotonicMs();
  const hrtime = (previous) => {
    const ns = BigInt(clock.nowNs);
    let seconds = Number(ns / 1_000_000_000n);
    let nanos = Number(ns % 1_000_000_000n);
    if (previous) {
      seconds -= previous[0];
      nanos -= previous[1];
      if (nanos < 0) {
        seconds -= 1;
        nanos += 1e9;
      }
    }
    return [seconds, nanos];
  };
  hrtime.bigint = () => BigInt(clock.nowNs);
  process.hrtime = hrtime;
  process.uptime = () => clock.nowNs / 1e9;
}

function installRandom() {
  Math.random = () => random.nextFloat();
  const getRandomValues = (view) => random.fill(view);
  const randomUUID = () => random.uuid();
  const web = globalThis.crypto;
  // The web crypto object's methods are on its prototype; own properties win.
  Object.defineProperty(web, "getRandomValues", { value: getRandomValues, configurable: true, writable: true });
  Object.defineProperty(web, "randomUUID", { value: randomUUID, configurable: true, writable: true });
  const node = nodeCrypto.default ?? nodeCrypto;
  node.randomUUID = randomUUID;
  // node:crypto's own `getRandomValues` (a fixed getter) calls the global
  // crypto object's method, patched above.
  node.randomBytes = (size, callback) => {
    const bytes = random.fill(Buffer.alloc(size));
    if (callback) {
      globalThis.setImmediate(() => callback(null, bytes));
      return undefined;
    }
    return bytes;
  };
  node.randomFillSync = (view, offset = 0, size) => {
    const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
    random.fill(bytes.subarray(offset, size === undefined ? undefined : offset + size));
    return view;
  };
  node.randomInt = (min, max) => {
    if (max === undefined) [min, max] = [0, min];
    return min + Math.floor(random.nextFloat() * (max - min));
  };
}

function installConsole() {
  const toStderr = (...args) => process.stderr.write(`${args.map(format).join(" ")}\n`);
  for (const method of ["log", "info", "debug", "warn", "error", "trace"]) console[method] = toStderr;
}

function format(value) {
  if (typeof value === "string") return value;
  if (value instanceof Error) return value.stack ?? String(value);
  try {
    return JSON.stringify(value);
  } catch {
    return String(value);
  }
}

installTimers();
installDate();
installRandom();
installConsole();
syncBuiltinESMExports();
