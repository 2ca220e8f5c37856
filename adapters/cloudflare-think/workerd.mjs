// workerd for one run: the config (written per run into its directory)
// and the process (started in a process group of its own, probed until it
// serves, killed with SIGKILL and reaped).
//
// The config: one Worker (the bundle), a Durable Object namespace for
// TurnsimThink with SQLite storage on local disk in the run's state
// directory (the `do` service, a writable disk), the run's settings as the
// text binding TURNSIM_SETTINGS, and no network: globalOutbound is an
// external service at the runner's provider, and TOOLS one at the runner's
// tool endpoint. A fetch to any host lands on the provider; nothing else
// is reachable.
//
// workerd drains for ~10 s on SIGTERM, so a run ends it with SIGKILL (and an
// eviction is SIGKILL too: the process dies with nothing flushed).
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const WORKERD = path.join(HERE, "node_modules/@cloudflare/workerd-linux-64/bin/workerd");

/** The class's WebSocket path, as routeAgentRequest names it. */
export const AGENT_PATH = "/agents/turnsim-think";

const capnpString = (text) => JSON.stringify(text); // capnp strings take JSON's escapes

/** Writes <runDir>/workerd.capnp and returns its path. */
export function writeConfig(runDir, { bundleDir, port, providerAddress, toolsAddress, settings }) {
  fs.mkdirSync(path.join(runDir, "do"), { recursive: true });
  // capnp's embed reads a path relative to the config file, never an absolute one.
  const embedded = (name) => capnpString(path.relative(runDir, path.join(bundleDir, name)));
  const config = `# Written by adapters/cloudflare-think/workerd.mjs for one run.
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = .app),
    (name = "do", disk = (path = ${capnpString(path.join(runDir, "do"))}, writable = true)),
    (name = "provider", external = (address = ${capnpString(providerAddress)}, http = ())),
    (name = "tools", external = (address = ${capnpString(toolsAddress)}, http = ()))
  ],
  sockets = [ (name = "http", address = ${capnpString(`127.0.0.1:${port}`)}, http = (), service = "main") ],
  extensions = [ (modules = [ (name = "cloudflare-internal:email", esModule = embed ${embedded("email-stub.js")}, internal = true) ]) ]
);

const app :Workerd.Worker = (
  modules = [ (name = "worker.js", esModule = embed ${embedded("worker.js")}) ],
  compatibilityDate = "2026-01-28",
  compatibilityFlags = ["nodejs_compat"],
  bindings = [
    (name = "TURNSIM_SETTINGS", text = ${capnpString(JSON.stringify(settings))}),
    (name = "TOOLS", service = "tools"),
    (name = "TurnsimThink", durableObjectNamespace = "TurnsimThink")
  ],
  durableObjectNamespaces = [
    (className = "TurnsimThink", uniqueKey = "turnsim-think-TurnsimThink", enableSql = true)
  ],
  durableObjectStorage = (localDisk = "do"),
  globalOutbound = "provider"
);
`;
  const file = path.join(runDir, "workerd.capnp");
  fs.writeFileSync(file, config);
  return file;
}

/**
 * Starts workerd on a written config and resolves once /health answers.
 * `onLog(line)` gets its stdout and stderr; `readyTimeoutMs` bounds the wait.
 */
export async function startWorkerd(configFile, { port, onLog = () => {}, readyTimeoutMs = 15000, verbose = false }) {
  const started = Date.now();
  // A process group of its own (killed whole), under a watchdog: workerd
  // runs beside a `cat` of the pipe from this process, and when the pipe
  // closes (this process died, even by SIGKILL) workerd is killed. Nothing
  // outlives the run, whoever kills whom.
  const watchdog = 'exec 3<&0; "$0" serve "$1" $2 < /dev/null & pid=$!; (cat <&3 > /dev/null; kill -9 $pid 2> /dev/null) & wait $pid';
  const child = spawn("sh", ["-c", watchdog, WORKERD, configFile, verbose ? "--verbose" : ""], {
    cwd: path.dirname(configFile),
    stdio: ["pipe", "pipe", "pipe"],
    detached: true
  });
  const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
  forwardLines(child.stdout, onLog);
  forwardLines(child.stderr, onLog);
  const handle = { child, exited, pid: child.pid };
  while (Date.now() - started < readyTimeoutMs) {
    if (child.exitCode !== null || child.signalCode !== null) break;
    if (await answers(`http://127.0.0.1:${port}/health`)) return { ...handle, readyMs: Date.now() - started };
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const exitedEarly = child.exitCode !== null || child.signalCode !== null;
  await killWorkerd(handle);
  throw new Error(exitedEarly ? `workerd exited before serving (${child.exitCode ?? child.signalCode})` : `workerd did not serve on port ${port} within ${readyTimeoutMs} ms`);
}

/** SIGKILL to workerd's process group; resolves once it is reaped. */
export async function killWorkerd(handle) {
  if (!handle) return;
  try {
    process.kill(-handle.pid, "SIGKILL");
  } catch {
    // already gone
  }
  await handle.exited;
}

async function answers(url) {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(500) });
    return response.ok;
  } catch {
    return false;
  }
}

function forwardLines(stream, onLine) {
  let rest = "";
  stream.setEncoding("utf8");
  stream.on("data", (text) => {
    const lines = (rest + text).split("\n");
    rest = lines.pop();
    for (const line of lines) onLine(line);
  });
  stream.on("end", () => rest && onLine(rest));
}
