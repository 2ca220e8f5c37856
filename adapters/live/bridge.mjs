// The live bridge: an engine process for turnsim's engine protocol that
// drives a real engine (a server no one can put under virtual time) in real
// time, and reports what crossed its boundary in the protocol's vocabulary,
// so the same scenarios and the same checkers judge it.
//
// One bridge process is one generation. At `init` it starts the engine
// (through the driver), its fault-injecting provider and the endpoint
// server tools call back to; at each later input it waits until real time
// reaches the input's `now_ns` (`pacing.mjs`), reports what the engine did
// since the last input, hands the input over, and reports again; then it
// answers `idle`, a tick away while the engine may still act on its own and
// with no timer once it is at rest. What it reports, in the order it
// happened:
//
// - a model request the engine made (`model_request`), with the engine's
//   stored transcript committed first, so the oracle finds in the store
//   what the request showed; a request the engine abandoned
//   (`model_cancel`); a server tool it asked for (`server_tool`);
// - frames to client connections (`send`), as the driver translates what
//   the engine's client API delivered;
// - the engine's stored transcript (`commit`s of what changed), snapshotted
//   before each model request and server tool, whenever the driver says it
//   changed, before a turn's `done` or `error` frame goes out, and at each
//   rest.
//
// An eviction is the harness killing the bridge's process group, the
// engine with it (SIGKILL); the next generation's bridge starts the engine
// again on the run's scratch directory. The end of a run (SIGTERM, or stdin
// closing) stops the engine and removes what the bridge made.
//
// `README.md` beside this file documents the driver interface.

import { Wire } from "./wire.mjs";
import { Pacing } from "./pacing.mjs";
import { LiveServer } from "./server.mjs";
import { StoreMirror } from "./store.mjs";
import { EngineProcess, SCRATCH_KEY, removeDirectory, scratchDirectory } from "./processes.mjs";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

/** How long the engine may stay busy without a rest before it counts as hung, in ms (`TURNSIM_LIVE_HANG_MS`). */
export const DEFAULT_HANG_MS = 120_000;

/** Runs the bridge over stdin/stdout with the driver `makeDriver(bridge)` builds. */
export async function runBridge(makeDriver, options = {}) {
  const bridge = new Bridge(makeDriver, options);
  process.on("SIGTERM", () => bridge.exit(0));
  process.on("SIGINT", () => bridge.exit(130));
  try {
    await bridge.run();
  } catch (error) {
    process.stderr.write(`live bridge: ${error.stack ?? error}\n`);
    bridge.exit(1);
  }
  bridge.exit(0);
}

/** A frame to a connection, or a call on a `chat()` callback. */
function toClient({ connection, frame, chat, call }) {
  return chat === undefined ? { type: "send", connection, frame } : { type: "callback", chat, call };
}

class Bridge {
  constructor(makeDriver, { pacing, hangMs = Number(process.env.TURNSIM_LIVE_HANG_MS) || DEFAULT_HANG_MS } = {}) {
    this.makeDriver = makeDriver;
    this.wire = new Wire();
    this.pacing = new Pacing(pacing);
    this.hangMs = hangMs;
    /** What the engine did, in the order it happened, not yet reported. */
    this.queue = [];
    /** Frames not yet sent; `done`/`error` frames wait for the store to be synced. */
    this.frames = [];
    this.terminalFrames = [];
    this.storeDirty = false;
    /** The engine's transcript as last snapshotted (protocol messages). */
    this.snapshot = [];
    this.processes = [];
    this.busySinceMs = null;
    this.hung = false;
    this.exiting = false;
  }

  async run() {
    for (;;) {
      const message = await this.wire.next();
      if (message === null) return;
      if (message.type === "init") await this.init(message);
      else await this.input(message);
    }
  }

  async init(message) {
    if (this.driver) throw new Error("a second `init`: a live bridge serves one generation (it offers neither `reinit` nor `generations`)");
    this.boot = message;
    this.storeMayRefuse = message.store_may_refuse !== false;
    this.scratch = scratchDirectory(message);
    mkdirSync(join(this.scratch.path, "logs"), { recursive: true });
    this.mirror = new StoreMirror(message.state?.messages ?? []);
    this.snapshot = message.state?.messages ?? [];
    this.server = new LiveServer({
      observe: (item) => this.queue.push(item),
      classify: (body) => this.driver.classify?.(body) ?? null,
      toolName: (name) => this.driver.toolNameOnWire?.(name) ?? name,
      retryAfterMs: null,
    });
    const base = await this.server.listen();
    this.driver = await this.makeDriver(this.api(base));
    this.server.retryAfterMs = this.driver.retryAfterMs ?? null;
    await this.driver.start();
    if (this.scratch.fresh) await this.commit([{ Put: { key: SCRATCH_KEY, value: this.scratch.path } }]);
    this.pacing.start(message.now_ns);
    const idle = { type: "idle", next_timer_ns: this.pacing.nextTimer(message.now_ns, this.busy()) };
    idle.capabilities = this.driver.capabilities ?? [];
    if (this.driver.lacks?.length) idle.lacks = this.driver.lacks;
    this.wire.write(idle);
  }

  /** What a driver is given: the run, the world's endpoints, and how to report. */
  api(base) {
    const bridge = this;
    return {
      generation: this.boot.generation,
      seed: this.boot.seed,
      config: this.boot.config,
      state: this.boot.state,
      scratchDir: this.scratch.path,
      providerUrl: `${base}/v1`,
      toolUrl: `${base}/turnsim/tool`,
      send(connection, frame) {
        bridge.frames.push({ connection, frame });
      },
      sendAfterStore(connection, frame) {
        bridge.terminalFrames.push({ connection, frame });
      },
      callback(chat, call) {
        bridge.frames.push({ chat, call });
      },
      callbackAfterStore(chat, call) {
        bridge.terminalFrames.push({ chat, call });
      },
      storeChanged() {
        bridge.storeDirty = true;
      },
      note(text) {
        bridge.queue.push({ kind: "note", text });
      },
      spawn(command, args, { env, cwd, name = "engine" } = {}) {
        const logPath = join(bridge.scratch.path, "logs", `${name}-generation-${bridge.boot.generation}.log`);
        const child = new EngineProcess(command, args, { env, cwd, logPath });
        bridge.processes.push(child);
        return child;
      },
      storedTranscript() {
        return bridge.snapshot;
      },
    };
  }

  async input(message) {
    await this.pacing.until(message.now_ns);
    await this.flush();
    if (message.type !== "timer") this.hung = false;
    await this.deliver(message);
    await this.flush();
    this.wire.write({ type: "idle", next_timer_ns: this.pacing.nextTimer(message.now_ns, await this.stillBusy()) });
  }

  /** Hands one input to the engine (or the world's side of it). */
  async deliver(message) {
    const driver = this.driver;
    switch (message.type) {
      case "model_chunk":
        return this.server.chunk(message.call, message.chunk);
      case "model_end":
        return this.server.end(message.call, message.end);
      case "server_tool_done":
        driver.toolFinished?.(message.call_id, message.outcome);
        return this.server.toolDone(message.call_id, message.outcome);
      case "timer":
        return;
      case "connect":
        return driver.connect(message.connection);
      case "disconnect":
        return driver.disconnect(message.connection);
      case "user_message":
        return driver.userMessage(message.text, message.options);
      default:
        return this.optional(message);
    }
  }

  /** Inputs a driver may not take: one it cannot is noted, never guessed at. */
  async optional(message) {
    const handlers = {
      resume_request: () => this.driver.resumeRequest?.(message.connection),
      resume_ack: () => this.driver.resumeAck?.(message.connection, message.request_id),
      tool_result: () => this.driver.toolResult?.(message.result, message.auto_continue),
      approval: () => this.driver.approval?.(message.call_id, message.approved, message.auto_continue),
      chat: () => this.driver.chat?.(message),
      deliver: () => this.driver.deliver?.(message),
      post_done: () => this.driver.postDone?.(message),
    };
    const handler = handlers[message.type];
    const handled = handler ? await handler() : undefined;
    if (handled === undefined && !this.handles(message.type)) this.note(`the engine takes no \`${message.type}\` input: ignored`);
  }

  handles(type) {
    const method = { resume_request: "resumeRequest", resume_ack: "resumeAck", tool_result: "toolResult", approval: "approval", chat: "chat", deliver: "deliver", post_done: "postDone" }[type];
    return method !== undefined && typeof this.driver[method] === "function";
  }

  /** Reports what the engine did since the last report, in order. */
  async flush() {
    while (this.queue.length > 0) {
      const item = this.queue.shift();
      if (item.kind === "model-open") await this.modelOpened(item.call);
      else if (item.kind === "model-close") this.modelClosed(item.call);
      else if (item.kind === "tool-start") await this.toolStarted(item.tool);
      else if (item.kind === "note") this.note(item.text);
    }
    if (this.storeDirty || this.terminalFrames.length > 0) await this.syncStore();
    this.sendFrames();
  }

  async modelOpened(call) {
    await this.syncStore();
    const request = this.driver.describeRequest(call.body, this.snapshot);
    const reply = await this.wire.request({ type: "model_request", request });
    this.server.numbered(call, reply.call);
  }

  modelClosed(call) {
    if (call.number !== null) this.wire.write({ type: "model_cancel", call: call.number });
  }

  async toolStarted(tool) {
    await this.syncStore();
    const requestId = this.driver.requestIdOfTool?.(tool) ?? "r1";
    this.wire.write({ type: "server_tool", request_id: requestId, call: { call_id: tool.callId, tool_name: tool.toolName, input: tool.input } });
  }

  /**
   * Snapshots the engine's transcript and commits what changed: frames the
   * client was sent before the snapshot go first (a client's screen is
   * never behind the store), then the commit, then the `done`/`error`
   * frames (a turn's end shows the store as it ended).
   */
  async syncStore() {
    await this.driver.framesSettled?.();
    this.storeDirty = false;
    this.snapshot = await this.driver.snapshot();
    this.sendFrames();
    const before = this.mirror.messages;
    const writes = this.mirror.update(this.snapshot);
    if (writes.length > 0 && !(await this.commit(writes))) this.mirror.messages = before;
    for (const effect of this.terminalFrames.splice(0)) this.wire.write(toClient(effect));
  }

  sendFrames() {
    for (const effect of this.frames.splice(0)) this.wire.write(toClient(effect));
  }

  /**
   * A commit, waited for when the store may refuse it; resolves to whether
   * the store took it (a refused one is tried again at the next snapshot:
   * the engine's own store took it, the harness's did not).
   */
  async commit(writes) {
    if (!this.storeMayRefuse) {
      this.wire.write({ type: "commit", writes, no_reply: true });
      return true;
    }
    const reply = await this.wire.request({ type: "commit", writes });
    if (!reply.ok) this.note(`the store refused a commit (${reply.error ?? "no reason"}); the engine's own store took it`);
    return reply.ok;
  }

  note(text) {
    process.stderr.write(`live: ${text}\n`);
  }

  busy() {
    return this.queue.length > 0 || this.frames.length > 0 || this.terminalFrames.length > 0 || this.server.busy() || this.driver.busy();
  }

  /** Whether to wake a tick later: the engine is busy (and not hung); at a rest, the store is synced first. */
  async stillBusy() {
    if (!this.busy()) {
      await this.syncStore();
      this.busySinceMs = null;
      return false;
    }
    const now = performance.now();
    this.busySinceMs ??= now;
    if (!this.hung && now - this.busySinceMs > this.hangMs) {
      this.hung = true;
      this.note(`the engine stayed busy for ${Math.round(now - this.busySinceMs)} ms without a rest: reported at rest from now on (hung)`);
    }
    return !this.hung;
  }

  /** Stops the engine, closes the server, removes what the bridge made; exits. */
  exit(code) {
    if (this.exiting) return;
    this.exiting = true;
    for (const child of this.processes) child.kill();
    try {
      this.driver?.stop?.();
      this.server?.close();
    } finally {
      if (this.scratch?.owned && process.env.TURNSIM_LIVE_KEEP_SCRATCH !== "1") removeDirectory(this.scratch.path);
      if (this.pacing.lateMsMax > 50) process.stderr.write(`live: an input was delivered up to ${Math.round(this.pacing.lateMsMax)} ms after its time\n`);
      process.exit(code);
    }
  }
}
