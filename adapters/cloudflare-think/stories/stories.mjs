// The stories run against the real Think: the seeds' (#1644, #1647,
// #1667, #1671, #1781), each finding of the glue engine
// (docs/cloudflare-agents-findings.md) that a client and a provider can
// show, and controls. Each is one turnsim scenario's story told in real
// time, named by `mirrors`. `run()` returns `{ ok, detail }`, ok when Think
// did what the story asks: Think's own contract where it has one (quoted
// beside the story), else the harness's invariant; or `{ na: true, detail }`
// when the story's premise cannot be set up on Think (not a verdict).
// `breaks: true` marks a story Think does not keep on any run
// (docs/cloudflare-think-findings.md classes each: finding, hardening
// request, out-of-contract input).
import { resumeRace } from "../repro/resume-race.mjs";
import { sleep, storedTool, textOf, waitFor, withWorld } from "./world.mjs";

const TERMINAL = "The assistant was interrupted and could not recover. Please try again.";
const text = (value) => ({ text: value });
const hang = { hang: true };
const stop = { finish: "stop" };
const call = (id, name, input = {}) => ({ call: { id, name, input } });

/** The client answers `id` once the call is shown input-available. */
async function answerWhenCalled(world, id, outcome, { delayMs = 0, autoContinue = true, withinMs = 10_000 } = {}) {
  if (!(await waitFor(() => world.sawToolCall(id), withinMs))) return false;
  await sleep(delayMs);
  world.client.toolResult(id, outcome, autoContinue);
  return true;
}

export const STORIES = [
  {
    name: "simple-turn",
    mirrors: "control: one user message, one streamed answer",
    async run() {
      return withWorld([[text("Hello "), text("world."), stop]], {}, async (world) => {
        world.client.userMessage("hi");
        await waitFor(() => world.terminals().length > 0, 10_000);
        const last = world.lastMessage();
        const ok = world.terminals()[0]?.Done !== undefined && textOf(last) === "Hello world." && world.modelCalls() === 1;
        return { ok, detail: `model calls ${world.modelCalls()}; stored "${textOf(last)}"` };
      });
    }
  },
  {
    name: "client-tool-round-trip",
    mirrors: "continuation-single-client-tool (control)",
    async run() {
      const answers = [[call("tc-1", "get_location"), { finish: "tool_calls" }], [text("You are in Lisbon."), stop]];
      return withWorld(answers, { tools: { get_location: "client" } }, async (world) => {
        world.client.userMessage("Where am I?");
        await answerWhenCalled(world, "tc-1", { Output: { city: "Lisbon" } });
        await waitFor(() => world.terminals().length >= 2, 10_000);
        const tool = storedTool(world.run, "tc-1");
        const ok = world.modelCalls() === 2 && tool?.state === "output-available" && textOf(world.lastMessage()).includes("Lisbon");
        return { ok, detail: `model calls ${world.modelCalls()}; tc-1 ${tool?.state}; last "${textOf(world.lastMessage())}"` };
      });
    }
  },
  {
    name: "duplicate-result-after-the-continuation",
    mirrors: "client-two-connections, client-scripted-results; glue finding 1",
    breaks: true,
    async run() {
      const answers = [[call("tc-1", "get_location"), { finish: "tool_calls" }], [text("You are in Lisbon."), stop], [text("Again."), stop]];
      return withWorld(answers, { tools: { get_location: "client" } }, async (world) => {
        // A second tab, as the published client sends it: each tab runs an
        // input-available client call and sends its result (useAgentChat's
        // processed set is per tab), the second one after the continuation.
        const secondTab = await world.run.connect("c2", { onFrame: () => {} });
        world.client.userMessage("Where am I?");
        await answerWhenCalled(world, "tc-1", { Output: { city: "Lisbon" } });
        await waitFor(() => world.terminals().length >= 2, 10_000);
        const callsAfterContinuation = world.modelCalls();
        secondTab.toolResult("tc-1", { Output: { city: "Lisbon" } }, true);
        await sleep(2000);
        const ok = callsAfterContinuation === 2 && world.modelCalls() === 2;
        return { ok, detail: `model calls after the continuation ${callsAfterContinuation}, after the second tab's result for tc-1 ${world.modelCalls()}` };
      });
    }
  },
  {
    name: "approval-of-a-tool-that-asked-none",
    mirrors: "approval-client-tool-stays-with-client; glue finding 3 (an input useAgentChat never sends)",
    breaks: true,
    async run() {
      const answers = [[call("tc-1", "client_action"), { finish: "tool_calls" }], [text("Done."), stop]];
      return withWorld(answers, { tools: { client_action: "client" } }, async (world) => {
        world.client.userMessage("do it");
        await waitFor(() => world.sawToolCall("tc-1") && world.terminals().length > 0, 10_000);
        world.client.approval("tc-1", true, true);
        await sleep(2000);
        const tool = storedTool(world.run, "tc-1");
        const ok = tool?.state === "input-available" && world.errors().length === 0;
        return { ok, detail: `tc-1 stored ${tool?.state}; model calls ${world.modelCalls()}; errors ${JSON.stringify(world.errors())}` };
      });
    }
  },
  {
    name: "held-continuation-after-a-stall",
    mirrors: "stall-after-batch-answered (#1671); glue finding 2",
    breaks: true,
    async run() {
      const answers = [[text("Ordering. "), call("tc-order", "order"), hang], [text("Ordered."), stop], [text("EXTRA"), stop]];
      return withWorld(answers, { tools: { order: "client" }, stall_timeout_ms: 1500 }, async (world) => {
        world.client.userMessage("order it");
        // The premise: the client answers while the stream is still open.
        // @ai-sdk/openai-compatible 3.0.92 finalises a tool call only when
        // the provider's stream ends, so a stream that stalls after a call
        // never shows it input-available: the story cannot be told.
        const answered = await answerWhenCalled(world, "tc-order", { Output: "ordered" }, { withinMs: 3000 });
        if (!answered) return { na: true, detail: `the call was never shown input-available while the stream was open; model calls ${world.modelCalls()}` };
        await waitFor(() => world.modelCalls() >= 2, 20_000);
        await sleep(6000);
        const ok = world.modelCalls() === 2;
        return { ok, detail: `model calls ${world.modelCalls()} at ${world.callTimes()} (the turn, its recovery${world.modelCalls() > 2 ? ", and the held continuation" : ""})` };
      });
    }
  },
  {
    name: "stalls-with-progress-spend-the-transient-budget",
    mirrors: "recovery-progress-keeps-the-budget; glue finding 7 (documented: src/think.ts 17433-17434)",
    async run() {
      // Think's contract: "Stalls count too: a turn that streams a little and then stalls
      // resets the progress-keyed attempt cap every time, so this is its only bound."
      // With maxAttempts 2, the third stall ends the turn however much it progressed.
      const answers = [[text("One. "), hang], [text("Two. "), hang], [text("Three. "), hang], [text("Four."), stop]];
      const config = { stall_timeout_ms: 1000, recovery: { max_attempts: 2, stable_timeout_ms: 2000 } };
      return withWorld(answers, config, async (world) => {
        world.client.userMessage("count");
        await waitFor(() => world.errors().length > 0 || textOf(world.lastMessage()).includes("Four."), 25_000);
        const ok = world.errors().includes(TERMINAL) && world.modelCalls() === 3;
        return { ok, detail: `model calls ${world.modelCalls()}; errors ${JSON.stringify(world.errors())}; stored "${textOf(world.lastMessage())}"` };
      });
    }
  },
  {
    name: "hung-attempts-end-on-no-progress",
    mirrors: "recovery-no-progress-window; glue finding 8",
    breaks: true,
    async run() {
      // agents' contract (chat/index.d.ts 644-653): noProgressTimeoutMs is "the primary
      // stuck-turn bound ... a genuinely idle turn is sealed within the window". Every
      // attempt after the first hangs before its first token: nothing progresses after
      // "Start.", so the 4 s window should seal the turn about 4 s after its first stall
      // (Think's default maxAttempts, 10, left as it is).
      const config = { stall_timeout_ms: 1000, recovery: { no_progress_window_ms: 4000, stable_timeout_ms: 2000 } };
      return withWorld([[text("Start. "), hang], [hang]], config, async (world) => {
        const started = Date.now();
        world.client.userMessage("go");
        await waitFor(() => world.errors().length > 0, 30_000);
        const seconds = (Date.now() - started) / 1000;
        const ok = world.errors().length > 0 && seconds <= 8;
        return { ok, detail: `${world.errors().length > 0 ? `sealed after ${seconds.toFixed(1)} s` : "still recovering after 30 s"}; model calls ${world.modelCalls()} at ${world.callTimes()}` };
      });
    }
  },
  {
    name: "dynamic-tool-stored-as-streamed",
    mirrors: "dynamic-tool-called-without-streamed-input, barrier-waits-for-a-dynamic-sibling; glue finding 5",
    breaks: true,
    async run() {
      // ai's contract (docs/04-ai-sdk-ui/03-chatbot-tool-usage.mdx:609): dynamic tools' "UI
      // parts use a generic `dynamic-tool` type". The app's own `dynamicTool`, called once:
      // kept when the part Think stores has the type the client's stream said.
      const answers = [[call("tc-1", "search", { q: "x" }), { finish: "tool_calls" }], [text("Found it."), stop]];
      return withWorld(answers, { tools: { search: "dynamic" } }, async (world) => {
        world.client.userMessage("search for x");
        await waitFor(() => textOf(world.lastMessage()).includes("Found it.") || world.errors().length > 0, 15_000);
        await sleep(300);
        const chunks = world.raw.flatMap((data) => (typeof data.body === "string" ? safeParse(data.body) : []));
        const streamedDynamic = chunks.some((chunk) => chunk.toolCallId === "tc-1" && chunk.type === "tool-input-start" && chunk.dynamic === true);
        const stored = world.run
          .store()
          .uiMessages.flatMap((message) => message.parts)
          .find((part) => part.toolCallId === "tc-1");
        const shown = streamedDynamic ? "dynamic-tool" : "tool-search";
        const ok = stored?.type === shown;
        return { ok, detail: `streamed tool-input-start dynamic: ${streamedDynamic} (a client shows ${shown}); Think stored ${stored?.type ?? "no part"} (${stored?.state}); model calls ${world.modelCalls()}; errors ${JSON.stringify(world.errors())}` };
      });
    }
  },
  {
    name: "recovery-status-stays-while-another-is-scheduled",
    mirrors: "recovery-status-stays-while-another-is-scheduled; glue finding 9",
    async run() {
      // agents' contract (chat/index.d.ts 1731-1733, buildChatRecoveringFrame): "A client
      // that connects between recovery attempts (no active stream) reads the turn as
      // working rather than frozen". The scenario's story: the first reply stalls, the
      // second message comes at 2.5 s and its reply stalls too; one recovery ends while
      // the other is still to run. Broken when the client is told "not recovering" and
      // the call that answers comes later with no stream between: the last status before
      // that call says false and came more than 100 ms before it (a status cleared as the
      // call starts is the same event, and leaves no window without an active stream).
      const answers = [[text("Let me think"), hang], [text("Looking it up"), hang], [text("Here it is."), stop]];
      return withWorld(answers, { stall_timeout_ms: 2000 }, async (world) => {
        world.client.userMessage("first question");
        await sleep(2500);
        world.client.userMessage("second question");
        await waitFor(() => textOf(world.lastMessage()).includes("Here it is.") || world.errors().length > 0, 30_000);
        await sleep(300);
        const at = (ms) => `${((ms - world.started) / 1000).toFixed(2)} s`;
        const statuses = world.frames
          .map((frame, index) => ({ frame, atMs: world.frameTimes[index] }))
          .filter(({ frame }) => frame.Recovering !== undefined);
        const answering = world.provider.requests.findIndex((request) => request.body?.messages?.some((message) => JSON.stringify(message).includes("Looking it up")));
        const answeredAt = world.provider.requests[answering]?.atMs;
        const before = answeredAt === undefined ? [] : statuses.filter(({ atMs }) => atMs <= answeredAt);
        const last = before.at(-1);
        const timeline = statuses.map(({ frame, atMs }) => `recovering=${frame.Recovering} at ${at(atMs)}`).join(", ") || "no status frame";
        const asked = world.provider.requests.findIndex((request) => JSON.stringify(request.body?.messages ?? []).includes("second question"));
        const detail = `model calls ${world.modelCalls()} at ${world.callTimes()}; "second question" first sent to the model ${asked < 0 ? "never" : `in call #${asked + 1}`}; the call that answers ("Here it is.") ${answering < 0 ? "never made" : `#${answering + 1} at ${at(answeredAt)}`}; status frames: ${timeline}; stored "${textOf(world.lastMessage())}"`;
        if (answering < 0) return { na: true, detail: `the premise did not happen: ${detail}` };
        const frozen = last?.frame.Recovering === false && answeredAt - last.atMs > 100;
        return { ok: !frozen, detail };
      });
    }
  },
  {
    name: "stall-recovers-with-a-terminal-frame",
    mirrors: "stall-recovers (#1644, #1647)",
    async run() {
      return withWorld([[text("Hel"), hang], [text("lo."), stop]], { stall_timeout_ms: 1000 }, async (world) => {
        const request = world.client.userMessage("hi");
        await waitFor(() => world.modelCalls() >= 2 && world.terminals().length >= 2, 10_000);
        await sleep(300);
        const interrupted = world.raw.some((data) => data.id === request && data.done && data.outcome === "recovering");
        const last = world.lastMessage();
        const streaming = last?.parts.some((part) => part.state === "streaming");
        const ok = interrupted && world.terminals().length >= 2 && textOf(last) === "Hello." && !streaming && world.errors().length === 0;
        return { ok, detail: `first request ended "recovering": ${interrupted}; terminal frames ${world.terminals().length}; stored "${textOf(last)}"${streaming ? " (streaming)" : ""}; model calls ${world.modelCalls()}` };
      });
    }
  },
  {
    name: "stall-exhausted-tells-the-client",
    mirrors: "stall-exhausted (#1644)",
    async run() {
      const config = { stall_timeout_ms: 1000, recovery: { max_attempts: 2, stable_timeout_ms: 2000 } };
      return withWorld([[text("a"), hang], [hang]], config, async (world) => {
        world.client.userMessage("hi");
        await waitFor(() => world.errors().length > 0, 20_000);
        const ok = world.errors().includes(TERMINAL);
        return { ok, detail: `errors ${JSON.stringify(world.errors())}; model calls ${world.modelCalls()}` };
      });
    }
  },
  {
    name: "stall-mid-tool-input-recovers",
    mirrors: "recovery-mid-tool-input (#1781)",
    async run() {
      const answers = [[text("Let me look. "), { partialCall: { id: "tc-1", name: "lookup", argumentsText: '{"q":"wea' } }, hang], [text("Here it is."), stop]];
      const config = { tools: { lookup: "client" }, stall_timeout_ms: 1000, recovery: { max_attempts: 3, stable_timeout_ms: 2000 } };
      return withWorld(answers, config, async (world) => {
        world.client.userMessage("look it up");
        await waitFor(() => world.errors().length > 0 || textOf(world.lastMessage()).includes("Here it is."), 15_000);
        await sleep(300);
        const last = world.lastMessage();
        const dangling = last?.parts.some((part) => part.type === "tool" && part.state === "input-streaming");
        const ok = world.errors().length === 0 && textOf(last).includes("Here it is.") && !dangling && world.modelCalls() <= 3;
        return { ok, detail: `model calls ${world.modelCalls()}; errors ${JSON.stringify(world.errors())}; stored "${textOf(last)}"${dangling ? " with a tool part input-streaming" : ""}` };
      });
    }
  },
  {
    name: "barrier-late-sibling",
    mirrors: "barrier-late-sibling (#1667: the stream-active gate and the event-driven barrier)",
    async run() {
      const answers = [[call("tc-fast", "fast"), { waitMs: 1200 }, call("tc-slow", "slow"), { finish: "tool_calls" }], [text("Both done."), stop], [text("EXTRA"), stop]];
      return withWorld(answers, { tools: { fast: "client", slow: "client" } }, async (world) => {
        world.client.userMessage("do both");
        await answerWhenCalled(world, "tc-fast", { Output: "fast" });
        await answerWhenCalled(world, "tc-slow", { Output: "slow" }, { delayMs: 300 });
        await waitFor(() => world.modelCalls() >= 2, 8000);
        await sleep(2000);
        const second = world.provider.requests[1]?.body.messages ?? [];
        const results = second.filter((message) => message.role === "tool").length;
        const slow = storedTool(world.run, "tc-slow");
        const ok = world.modelCalls() === 2 && results === 2 && slow?.state === "output-available";
        return { ok, detail: `model calls ${world.modelCalls()}; tool results in the continuation ${results}; tc-slow stored ${slow?.state}` };
      });
    }
  },
  {
    name: "resume-race-after-a-kill",
    mirrors: "a reconnecting client that probes and acks (useAgentChat) races recovery; docs/upstream/cloudflare-think-resume-ack-skips-recovery.md",
    breaks: true,
    async run() {
      const outcome = await resumeRace({ kills: 2, client: "probe", downMs: 300 });
      return { ok: outcome.name !== "abandoned", detail: outcome.detail };
    }
  }
];

function safeParse(text) {
  try {
    return [JSON.parse(text)];
  } catch {
    return [];
  }
}
