// Module customization hooks for engine generations (registered by
// generations.mjs the first time a process starts a second generation).
//
// A generation's engine is loaded from its entry module's URL with a
// `turnsim-generation=N` query: a URL the module cache has not seen, so the
// module is evaluated afresh. This hook carries the query on to every
// module the engine itself imports from its own files (relative imports,
// imports of sibling files), so each of them is a fresh instance too. What
// it does not carry it to is shared, evaluated once per process: packages
// under `node_modules` (their code and their module state: the heavy
// dependencies), Node's built-ins, and the SDK itself (its sandbox owns
// the process-wide clock and generator, which every generation reuses after
// a reset).

const QUERY = "turnsim-generation";
let sdk = "";

export function initialize(data) {
  sdk = data?.sdk ?? "";
}

export async function resolve(specifier, context, nextResolve) {
  const resolved = await nextResolve(specifier, context);
  const parent = context.parentURL;
  if (!parent || !parent.includes(QUERY)) return resolved;
  const generation = new URL(parent).searchParams.get(QUERY);
  if (generation === null || !isEnginesOwn(resolved.url)) return resolved;
  const url = new URL(resolved.url);
  url.searchParams.set(QUERY, generation);
  return { ...resolved, url: url.href };
}

/** A file of the engine's own: not a package's, not a built-in, not the SDK's. */
function isEnginesOwn(url) {
  if (!url.startsWith("file:")) return false;
  if (url.includes("/node_modules/")) return false;
  return !(sdk && url.startsWith(sdk));
}
