// What opencode runs on, laid out in the run's scratch directory: its home
// (`HOME`: config, data, sessions, logs; kept across generations, so a
// restarted server finds its sessions), a project directory it works in,
// the scenario's server tools as custom tools, and its config
// (`OPENCODE_CONFIG_CONTENT`):
//
// - the provider is the bridge's (`@ai-sdk/openai-compatible` at
//   `bridge.providerUrl`), the only model, so every model request the
//   turn makes reaches the scenario's script;
// - `engine.stall_timeout_ms` is the provider's `chunkTimeout` and
//   `headerTimeout` (opencode's own stall bounds; off, they stay at
//   opencode's 300 s); `engine.max_steps` is the build agent's `steps`;
// - the title generator is off (a request the scenario did not script).
//
// A server tool of the scenario is a custom tool
// (`.opencode/tool/<name>.js`, named as the scenario names it) whose
// `execute` posts its call to the bridge and returns what the harness's
// tool run answered (an error outcome throws), so each run crosses the
// boundary as a `server_tool` effect.
//
// opencode installs `@opencode-ai/plugin` into every config directory it
// loads (the project's `.opencode`, `~/.config/opencode`) in the
// background, and loads custom tools only once that install is done; it
// skips the install when `node_modules` exists and `package-lock.json`
// lists every dependency of `package.json`. Both directories get those
// three, `node_modules` linked to this adapter's own pinned install, so a
// run never reaches the registry.

import { existsSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
export const PLUGIN_VERSION = "1.18.33";

/** The directories of a run: `{home, project}`, made if missing. */
export function layout(scratchDir) {
  const home = join(scratchDir, "home");
  const project = join(scratchDir, "project");
  for (const directory of [home, project, join(home, ".config", "opencode"), join(project, ".opencode", "tool")]) mkdirSync(directory, { recursive: true });
  settleDependencies(join(home, ".config", "opencode"));
  settleDependencies(join(project, ".opencode"));
  return { home, project };
}

function settleDependencies(directory) {
  const packageJson = { dependencies: { "@opencode-ai/plugin": PLUGIN_VERSION } };
  writeFileSync(join(directory, "package.json"), `${JSON.stringify(packageJson, null, 2)}\n`);
  const lock = { name: "opencode-config", lockfileVersion: 3, requires: true, packages: { "": packageJson } };
  writeFileSync(join(directory, "package-lock.json"), `${JSON.stringify(lock, null, 2)}\n`);
  const modules = join(directory, "node_modules");
  if (!existsSync(modules)) symlinkSync(join(HERE, "node_modules"), modules, "dir");
}

/** The scenario's server tools (`config.tools`: name → kind) as custom tools calling back to `toolUrl`. */
export function writeTools(project, tools, toolUrl) {
  for (const [name, kind] of Object.entries(tools ?? {})) {
    if (kind !== "server") continue;
    writeFileSync(join(project, ".opencode", "tool", `${name}.js`), customTool(name, toolUrl));
  }
}

function customTool(name, toolUrl) {
  return `// A turnsim server tool: its run is the harness's (written by adapters/opencode/workspace.mjs).
export default {
  description: ${JSON.stringify(`The scenario's server tool ${name}.`)},
  args: {},
  async execute(args, context) {
    const response = await fetch(${JSON.stringify(toolUrl)}, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ call_id: context.callID, tool_name: ${JSON.stringify(name)}, input: args, context: { sessionID: context.sessionID, messageID: context.messageID } }),
      signal: context.abort,
    });
    const { outcome } = await response.json();
    if (outcome && "Output" in outcome) return typeof outcome.Output === "string" ? outcome.Output : JSON.stringify(outcome.Output);
    throw new Error(outcome && typeof outcome.Error === "string" ? outcome.Error : "the tool failed");
  },
};
`;
}

/** opencode's config for a run, as `OPENCODE_CONFIG_CONTENT`. */
export function opencodeConfig(engine, providerUrl) {
  const options = { baseURL: providerUrl, apiKey: "turnsim" };
  if (engine.stall_timeout_ms > 0) {
    options.chunkTimeout = engine.stall_timeout_ms;
    options.headerTimeout = engine.stall_timeout_ms;
  }
  return {
    $schema: "https://opencode.ai/config.json",
    provider: { turnsim: { npm: "@ai-sdk/openai-compatible", name: "turnsim", options, models: { model: { name: "the scenario's model" } } } },
    model: "turnsim/model",
    small_model: "turnsim/model",
    autoupdate: false,
    share: "disabled",
    agent: { title: { disable: true }, build: { steps: engine.max_steps } },
  };
}

/** The opencode server binary of this adapter's pinned install (`TURNSIM_OPENCODE_BIN` overrides it). */
export function opencodeBinary() {
  if (process.env.TURNSIM_OPENCODE_BIN) return process.env.TURNSIM_OPENCODE_BIN;
  const arch = process.arch === "arm64" ? "arm64" : "x64";
  for (const variant of [`opencode-${process.platform}-${arch}`, `opencode-${process.platform}-${arch}-baseline`]) {
    const binary = join(HERE, "node_modules", variant, "bin", "opencode");
    if (existsSync(binary)) return binary;
  }
  throw new Error(`no opencode binary under ${join(HERE, "node_modules")}: run \`npm ci --prefix adapters/opencode\``);
}
