// Fresh instances of an engine's modules, one per generation, in the same
// process: what lets an eviction cost a module evaluation instead of a new
// Node process, and still leave nothing of the old generation behind.
//
// The engine's entry module is imported again under a URL the module cache
// has not seen (`?turnsim-generation=N`); generation-hooks.mjs carries the
// query on to the engine's own files, so their module state starts over,
// while packages and the SDK stay as they are (loaded once per process).
// Globals the engine added or replaced since the first `init` are put back
// as they were.

import { register } from "node:module";

const HOOKS = new URL("./generation-hooks.mjs", import.meta.url);
const SDK = new URL("./", import.meta.url).href;

let hooked = false;
/** @type {Map<string | symbol, PropertyDescriptor> | null} */
let globals = null;

/** Evaluates a fresh instance of `module` (a URL) for `generation`. */
export async function freshInstance(module, generation) {
  if (!hooked) {
    register(HOOKS, { data: { sdk: SDK } });
    hooked = true;
  }
  const url = new URL(module);
  url.searchParams.set("turnsim-generation", String(generation));
  await import(url.href);
}

/** Notes the globals as they are before the first generation runs. */
export function rememberGlobals() {
  globals = new Map(Reflect.ownKeys(globalThis).map((key) => [key, Object.getOwnPropertyDescriptor(globalThis, key)]));
}

/** Puts the globals back as `rememberGlobals` found them: what a new process would see. */
export function forgetGlobals() {
  if (!globals) return;
  for (const key of Reflect.ownKeys(globalThis)) {
    if (!globals.has(key)) {
      delete globalThis[key];
      continue;
    }
    const was = globals.get(key);
    const now = Object.getOwnPropertyDescriptor(globalThis, key);
    if (now.value !== was.value || now.get !== was.get || now.set !== was.set) {
      if (now.configurable) Object.defineProperty(globalThis, key, was);
      else if (now.writable) globalThis[key] = was.value;
    }
  }
}
