// The bundle step: the app (app/think-agent.js) and its packages, as one
// ES module workerd loads, built by esbuild the way wrangler builds a
// Worker (the `workerd` export conditions, `cloudflare:` and `node:`
// modules left to the runtime). Offline: nothing but node_modules is read.
//
// Cached by what it is built from: target/cloudflare-think/bundle-<hash>/,
// where <hash> covers package-lock.json and every file under app/. A
// second build of the same inputs is a cache hit and costs nothing.
//
//   node adapters/cloudflare-think/bundle.mjs      prints the bundle's directory
import { createHash } from "node:crypto";
import { builtinModules } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, "../..");
const APP = path.join(HERE, "app");

/** The hash of everything the bundle is built from. */
export function inputsHash() {
  const hash = createHash("sha256");
  hash.update(fs.readFileSync(path.join(HERE, "package-lock.json")));
  for (const name of fs.readdirSync(APP).sort()) {
    hash.update(name);
    hash.update(fs.readFileSync(path.join(APP, name)));
  }
  return hash.digest("hex").slice(0, 16);
}

/** The directory holding worker.js and email-stub.js, built if not cached. */
export async function bundle({ log = () => {} } = {}) {
  const dir = path.join(REPO, "target", "cloudflare-think", `bundle-${inputsHash()}`);
  if (fs.existsSync(path.join(dir, "worker.js"))) return dir;
  const started = Date.now();
  const building = `${dir}.building-${process.pid}`;
  fs.rmSync(building, { recursive: true, force: true });
  fs.mkdirSync(building, { recursive: true });
  const esbuild = await import("esbuild");
  await esbuild.build({
    entryPoints: [path.join(APP, "think-agent.js")],
    outfile: path.join(building, "worker.js"),
    bundle: true,
    format: "esm",
    platform: "neutral",
    target: "es2024",
    conditions: ["workerd", "worker", "browser", "import", "default"],
    mainFields: ["module", "main"],
    // nodejs_compat serves Node's modules, with or without the `node:` prefix.
    external: ["cloudflare:*", "node:*", ...builtinModules],
    logLevel: "warning"
  });
  fs.copyFileSync(path.join(APP, "email-stub.js"), path.join(building, "email-stub.js"));
  fs.renameSync(building, dir); // whole or absent: a killed build leaves no half bundle
  log(`bundled in ${Date.now() - started} ms: ${dir}`);
  return dir;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  console.log(await bundle({ log: (line) => console.error(line) }));
}
