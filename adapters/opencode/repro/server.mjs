// What every repro here needs, and nothing of turnsim: opencode's pinned
// server (this adapter's `npm ci`) started on a temporary home with one
// OpenAI-compatible provider, a scriptable mock of that provider, and a
// few calls of opencode's HTTP API. Each repro script is one behaviour,
// run with `node adapters/opencode/repro/NAME.mjs`: it prints what it saw
// and the upstream line it concerns, and exits 1 while the behaviour holds
// (0 once it does not).

import { spawn } from "node:child_process";
import http from "node:http";
import net from "node:net";
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ADAPTER = dirname(dirname(fileURLToPath(import.meta.url)));

/**
 * A mock provider: `answer(index, body, response)` writes the index-th
 * chat completions request's answer (from 0). Records each request's time.
 */
export async function mockProvider(answer) {
  const requests = [];
  const server = http.createServer((request, response) => {
    let text = "";
    request.on("data", (part) => (text += part));
    request.on("end", () => {
      const body = JSON.parse(text || "{}");
      if (!Array.isArray(body.tools) || body.tools.length === 0) return sse(response, [delta({ content: "Noted." }), finish("stop"), usage(1)], true);
      requests.push({ at: performance.now(), body });
      answer(requests.length - 1, body, response);
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${server.address().port}/v1`, requests, close: () => server.closeAllConnections() || server.close() };
}

export const delta = (fields) => ({ choices: [{ index: 0, delta: fields, finish_reason: null }] });
export const finish = (reason) => ({ choices: [{ index: 0, delta: {}, finish_reason: reason }] });
export const usage = (completion) => ({ choices: [], usage: { prompt_tokens: 10, completion_tokens: completion, total_tokens: 10 + completion } });

/** Writes SSE events (`data: {...}`), then `[DONE]` and the end when `done`. */
export function sse(response, events, done) {
  if (!response.headersSent) response.writeHead(200, { "content-type": "text/event-stream" });
  for (const event of events) response.write(`data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 0, model: "m", ...event })}\n\n`);
  if (done) response.end("data: [DONE]\n\n");
}

/** opencode serve, pinned, on a temporary home; `providerOptions` go to the provider. */
export async function startOpencode(providerUrl, providerOptions = {}) {
  const scratch = mkdtempSync(join(tmpdir(), "opencode-repro-"));
  const home = join(scratch, "home");
  const project = join(scratch, "project");
  for (const directory of [join(home, ".config", "opencode"), join(project, ".opencode")]) settleDependencies(directory);
  const port = await freePort();
  const config = {
    provider: { mock: { npm: "@ai-sdk/openai-compatible", name: "mock", options: { baseURL: providerUrl, apiKey: "x", ...providerOptions }, models: { model: { name: "model" } } } },
    model: "mock/model",
    autoupdate: false,
    share: "disabled",
    agent: { title: { disable: true } },
  };
  const env = { ...process.env, HOME: home, OPENCODE_CONFIG_CONTENT: JSON.stringify(config), OPENCODE_DISABLE_MODELS_FETCH: "1", OPENCODE_DISABLE_DEFAULT_PLUGINS: "1" };
  for (const name of Object.keys(env)) if (name.startsWith("XDG_")) delete env[name];
  const child = spawn(binary(), ["serve", "--port", String(port), "--hostname", "127.0.0.1", "--pure"], { cwd: project, env, stdio: "ignore" });
  const base = `http://127.0.0.1:${port}`;
  const stop = () => {
    child.kill("SIGKILL");
    rmSync(scratch, { recursive: true, force: true });
  };
  process.on("exit", stop);
  for (const deadline = performance.now() + 60_000; performance.now() < deadline; await sleep(100)) {
    // Requests in the first moments after the port opens can hang: short tries.
    if ((await api(base, "GET", "/global/health", undefined, 500).catch(() => ({ status: 0 }))).status === 200) break;
  }
  await api(base, "GET", "/experimental/tool/ids", undefined, 60_000);
  const session = (await api(base, "POST", "/session", {})).body.id;
  return { base, session, child, stop };
}

function settleDependencies(directory) {
  // opencode installs @opencode-ai/plugin into each config directory unless
  // node_modules exists and package-lock.json lists package.json's dependencies.
  mkdirSync(directory, { recursive: true });
  const packageJson = { dependencies: { "@opencode-ai/plugin": "1.18.33" } };
  writeFileSync(join(directory, "package.json"), JSON.stringify(packageJson));
  writeFileSync(join(directory, "package-lock.json"), JSON.stringify({ lockfileVersion: 3, packages: { "": packageJson } }));
  if (!existsSync(join(directory, "node_modules"))) symlinkSync(join(ADAPTER, "node_modules"), join(directory, "node_modules"), "dir");
}

function binary() {
  const found = ["opencode-linux-x64", "opencode-linux-x64-baseline", "opencode-linux-arm64"].map((name) => join(ADAPTER, "node_modules", name, "bin", "opencode")).find(existsSync);
  if (!found) throw new Error("no opencode binary: run `npm ci --prefix adapters/opencode`");
  return found;
}

/** One request to opencode's API: `{status, body}`. */
export function api(base, method, path, body, timeoutMs = 30_000) {
  return new Promise((resolve, reject) => {
    const text = body === undefined ? undefined : JSON.stringify(body);
    const request = http.request(new URL(path, base), { method, timeout: timeoutMs, headers: text ? { "content-type": "application/json" } : {} }, (response) => {
      let raw = "";
      response.on("data", (part) => (raw += part));
      response.on("end", () => resolve({ status: response.statusCode, body: raw ? JSON.parse(raw) : null }));
    });
    request.on("timeout", () => request.destroy(new Error(`${method} ${path} timed out`)));
    request.on("error", reject);
    if (text) request.write(text);
    request.end();
  });
}

/** Waits until the session is idle again after a prompt (or `ms`). */
export async function untilIdle(base, session, ms = 60_000) {
  const deadline = performance.now() + ms;
  let busySeen = false;
  while (performance.now() < deadline) {
    const status = (await api(base, "GET", "/session/status")).body ?? {};
    if (status[session] && status[session].type !== "idle") busySeen = true;
    else if (busySeen) return true;
    await sleep(100);
  }
  return false;
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function freePort() {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}
