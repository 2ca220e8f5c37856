// A small fake harness: spawns an engine command and drives it through the
// protocol as turnsim does. It answers requests the moment they arrive
// (commit: the store takes the writes unless told to refuse, and a commit
// with `no_reply` in a run whose store refuses nothing is taken unanswered;
// model_request: the next call number; fault_point: never fire; post: the
// next post number, never answered; exhausted: the hook runs; with `named`,
// `init` gives the next numbers and a call or post that names its own is
// checked against them, unanswered), records
// every line the engine wrote, and turns the faults a
// harness must catch into errors: a line that is not JSON, a message the
// protocol does not have, and an exit or a closed stdout before `idle`.

import { spawn } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { apply } from "../node/store.mjs";

/** The protocol version this harness speaks (`docs/protocol.md`). */
const PROTOCOL_VERSION = 7;

const REQUESTS = new Set(["commit", "model_request", "fault_point", "post", "exhausted"]);
const EFFECTS = new Set(["send", "model_cancel", "server_tool", "callback", "observe", "idle"]);

export const EMPTY_STATE = {
  messages: [],
  next_id: 0,
  continuation_intent: null,
  in_flight: null,
  incidents: {},
  alarms: [],
  progress: 0,
  deliveries: {},
  terminal_status: null,
};

export const DEFAULT_CONFIG = {
  tools: {},
  coalesce_ms: 50,
  stall_timeout_ms: 0,
  recovery: {
    enabled: true,
    max_attempts: 10,
    stable_timeout_ms: 10000,
    stable_retry_delay_ms: 3000,
    no_progress_window_ms: 300000,
    alarm_debounce_ms: 30000,
    alarm_delay_ms: 1000,
    terminal_message: "The assistant was interrupted and could not recover. Please try again.",
  },
  max_model_calls_empty_finish: 3,
  max_model_calls_http_retry: 4,
  retry_initial_delay_ms: 2000,
  max_steps: 16,
  regressions: [],
};

/** Engines started by any harness, so a failed test still ends its process. */
const started = new Set();

/** Kills every engine process a harness started and that is still running. */
export function killAll() {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  started.clear();
}

export class FakeHarness {
  /** @param {string[]} argv the engine command, e.g. ["node", "engine.mjs"] */
  constructor(argv, { refuseCommits = false, storeMayRefuse = true, faultSites = [], named = false } = {}) {
    this.child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "pipe"] });
    started.add(this.child);
    this.stderr = "";
    this.child.stderr.on("data", (data) => (this.stderr += data));
    this.lines = [];
    this.waiting = null;
    this.exited = false;
    const lines = createInterface({ input: this.child.stdout });
    // The end of its stdout, not its exit, ends what it said: lines may still be buffered at exit.
    lines.on("close", () => {
      this.exited = true;
      this.waiting?.resolve(null);
      this.waiting = null;
    });
    lines.on("line", (line) => {
      if (this.waiting) {
        const waiting = this.waiting;
        this.waiting = null;
        waiting.resolve(line);
      } else this.lines.push(line);
    });
    this.nowNs = 0;
    this.store = structuredClone(EMPTY_STATE);
    this.store.extra = {};
    this.nextCall = 0;
    this.nextPost = 0;
    this.refuseCommits = refuseCommits;
    this.storeMayRefuse = storeMayRefuse || refuseCommits;
    this.faultSites = faultSites;
    this.named = named;
    /** Every line the engine wrote, in order. */
    this.transcript = [];
  }

  async init({ seed = 0, config = DEFAULT_CONFIG, state = EMPTY_STATE, wallBaseMs = 1_700_000_000_000, generation = 1 } = {}) {
    this.store = structuredClone(state);
    this.store.extra ??= {};
    const terms = { store_may_refuse: this.storeMayRefuse, fault_sites: this.faultSites };
    if (this.named) Object.assign(terms, { next_call: this.nextCall + 1, next_post: this.nextPost + 1 });
    return this.input({ type: "init", protocol: PROTOCOL_VERSION, seed, generation, wall_base_ms: wallBaseMs, config, state, ...terms });
  }

  /** Sends one input (with the current `now_ns`) and serves the engine until `idle`; returns its messages. */
  async input(message) {
    this.write({ ...message, now_ns: this.nowNs });
    return this.untilIdle();
  }

  /** Sends the inputs of one instant in one `inputs` line; returns each one's messages, up to its `idle`. */
  async inputs(messages) {
    const inputs = messages.map((message) => ({ ...message, now_ns: this.nowNs }));
    this.write({ type: "inputs", now_ns: this.nowNs, inputs });
    const answers = [];
    for (const _ of inputs) answers.push(await this.untilIdle());
    return answers;
  }

  async untilIdle() {
    const messages = [];
    for (;;) {
      const next = await this.readMessage();
      messages.push(next);
      if (next.type === "idle") return messages;
      if (next.type === "commit" && next.no_reply) this.takeUnanswered(next);
      else if (this.isNamed(next)) this.takeNamed(next);
      else if (REQUESTS.has(next.type)) this.write({ type: "reply", value: this.answer(next) });
    }
  }

  isNamed(request) {
    return (request.type === "model_request" && request.call !== undefined) || (request.type === "post" && request.post !== undefined);
  }

  /** A call or post that names its number: it must be the next one, and only where `init` gave the numbers. */
  takeNamed(request) {
    const [field, counter] = request.type === "post" ? ["post", "nextPost"] : ["call", "nextCall"];
    if (!this.named) throw new EngineFault("engine-protocol", `a ${request.type} named ${request[field]} in a run whose init gave no numbers`);
    this[counter] += 1;
    if (request[field] !== this[counter]) {
      throw new EngineFault("engine-protocol", `a ${request.type} named ${request[field]}, but it is number ${this[counter]}`);
    }
  }

  /** Moves time to `ns` and sends `timer`. */
  timer(ns) {
    this.nowNs = ns;
    return this.input({ type: "timer" });
  }

  /** A commit the engine does not wait on: allowed only when the store refuses nothing. */
  takeUnanswered(commit) {
    if (this.storeMayRefuse) throw new EngineFault("engine-protocol", "a commit with no_reply in a run whose store may refuse one");
    for (const write of commit.writes) apply(this.store, write);
  }

  answer(request) {
    switch (request.type) {
      case "commit":
        if (this.refuseCommits) return { ok: false, error: "refused" };
        for (const write of request.writes) apply(this.store, write);
        return { ok: true };
      case "model_request":
        this.nextCall += 1;
        return { call: this.nextCall };
      case "fault_point":
        return { fire: false };
      case "post":
        this.nextPost += 1;
        return { post: this.nextPost };
      case "exhausted":
        return { ok: true };
      default:
        throw new Error(`not a request: ${request.type}`);
    }
  }

  write(message) {
    this.child.stdin.write(`${JSON.stringify(message)}\n`);
  }

  writeRaw(text) {
    this.child.stdin.write(text);
  }

  /** The next message; throws on every fault the protocol names. */
  async readMessage() {
    const line = await this.readLine();
    if (line === null) throw new EngineFault("engine-crashed", `it exited before going idle; stderr:\n${this.stderr}`);
    let message;
    try {
      message = JSON.parse(line);
    } catch {
      throw new EngineFault("engine-protocol", `not JSON: ${line}`);
    }
    if (!REQUESTS.has(message.type) && !EFFECTS.has(message.type)) {
      throw new EngineFault("engine-protocol", `a message the protocol does not have: ${message.type}`);
    }
    return message;
  }

  readLine() {
    if (this.lines.length > 0) return Promise.resolve(this.record(this.lines.shift()));
    if (this.exited) return Promise.resolve(null);
    return new Promise((resolve) => (this.waiting = { resolve })).then((line) => (line === null ? null : this.record(line)));
  }

  record(line) {
    this.transcript.push(line);
    return line;
  }

  /** Whether the engine writes anything within `ms` of real time (it must not, once idle). */
  async silentFor(ms) {
    await new Promise((resolve) => setTimeout(resolve, ms));
    return this.lines.length === 0;
  }

  /** Closes stdin and resolves to the exit code. */
  async close() {
    this.child.stdin.end();
    if (this.child.exitCode !== null) return this.child.exitCode;
    const [code] = await once(this.child, "exit");
    return code;
  }

  kill() {
    this.child.kill("SIGKILL");
  }
}

export class EngineFault extends Error {
  constructor(kind, message) {
    super(`${kind}: ${message}`);
    this.kind = kind;
  }
}

/** The protocol chunks of a scripted text answer, then its finish. */
export function textChunks(id, pieces) {
  return [
    { type: "text-start", id },
    ...pieces.map((delta) => ({ type: "text-delta", id, delta })),
    { type: "text-end", id },
    { type: "finish-step", reason: "stop", usage: { input_tokens: 10, output_tokens: pieces.length } },
    { type: "finish", reason: "stop" },
  ];
}
