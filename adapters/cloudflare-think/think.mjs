// One run of Think: its directory, its port, its workerd, its clients.
// `start()` bundles (cached) and starts workerd on a fresh state directory;
// `evict()` is SIGKILL of workerd's process group and a restart on the same
// directory and port (the clients' sockets die with it, as a browser's do
// when the object is killed); `stop()` kills it and removes the directory.
// Every process it started is reaped before `stop()` resolves.
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { bundle } from "./bundle.mjs";
import { ThinkClient } from "./client.mjs";
import { clientToolSchemas, thinkSettings } from "./settings.mjs";
import { readStore } from "./store.mjs";
import { killWorkerd, startWorkerd, writeConfig } from "./workerd.mjs";

export class ThinkRun {
  /**
   * `config`: the scenario's `EngineConfig`; `providerAddress` and
   * `toolsAddress`: host:port of the runner's provider and tool endpoint;
   * `instance`: the Durable Object's name (one conversation).
   */
  constructor({ config, providerAddress, toolsAddress, instance = "conversation", onLog = () => {}, keepAliveIntervalMs }) {
    this.config = config;
    this.keepAliveIntervalMs = keepAliveIntervalMs; // Think's own knob, not a scenario's: settings.mjs's default when unset
    this.providerAddress = providerAddress;
    this.toolsAddress = toolsAddress;
    this.instance = instance;
    this.onLog = onLog;
    this.clients = new Map();
  }

  async start() {
    this.bundleDir = await bundle({ log: this.onLog });
    this.runDir = fs.mkdtempSync(path.join(os.tmpdir(), "turnsim-think-"));
    this.port = await freePort();
    this.configFile = writeConfig(this.runDir, {
      bundleDir: this.bundleDir,
      port: this.port,
      providerAddress: this.providerAddress,
      toolsAddress: this.toolsAddress,
      settings: { ...thinkSettings(this.config), ...(this.keepAliveIntervalMs ? { keepAliveIntervalMs: this.keepAliveIntervalMs } : {}) }
    });
    await this.boot();
  }

  async boot() {
    this.workerd = await startWorkerd(this.configFile, { port: this.port, onLog: (line) => this.onLog(`workerd: ${line}`) });
    return this.workerd.readyMs;
  }

  /**
   * SIGKILL, then (after `downMs` with no process) workerd again on the same
   * state; resolves once it serves. Returns its start-up time.
   */
  async evict({ downMs = 0 } = {}) {
    await this.kill();
    if (downMs > 0) await new Promise((resolve) => setTimeout(resolve, downMs));
    return this.boot();
  }

  async kill() {
    for (const client of this.clients.values()) client.close();
    this.clients.clear();
    await killWorkerd(this.workerd);
    this.workerd = null;
  }

  async stop() {
    await this.kill();
    if (this.runDir) fs.rmSync(this.runDir, { recursive: true, force: true });
  }

  /** A new client connection; resolves once its socket is open. */
  async connect(connectionId, { onFrame, onRaw, onClose = () => {}, ackOffersUnasked = true }) {
    const client = new ThinkClient({
      port: this.port,
      instance: this.instance,
      connectionId,
      clientTools: clientToolSchemas(this.config),
      onFrame,
      onRaw,
      onClose: () => {
        this.clients.delete(connectionId);
        onClose();
      },
      onLog: this.onLog,
      ackOffersUnasked
    });
    this.clients.set(connectionId, client);
    await client.open();
    return client;
  }

  disconnect(connectionId) {
    this.clients.get(connectionId)?.close();
    this.clients.delete(connectionId);
  }

  /** What Think persisted (store.mjs). */
  store() {
    return readStore(path.join(this.runDir, "do"));
  }
}

/** A port nothing listens on now (the kernel's pick, released for workerd). */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}
