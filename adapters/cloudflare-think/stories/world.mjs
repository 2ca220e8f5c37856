// What a story runs in: a provider answering from a script, Think in
// workerd with the story's config, one client, everything it was sent (as
// turnsim frames and as Think's own), and waits bounded in wall time.
// `withWorld(answers, config, body)` tears it all down whatever happens.
import { ThinkRun } from "../think.mjs";
import { startProvider } from "../repro/provider.mjs";

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

/** Resolves true once `condition()` holds, false after `timeoutMs`. */
export async function waitFor(condition, timeoutMs) {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (condition()) return true;
    await sleep(20);
  }
  return condition();
}

export async function withWorld(answers, config, body, { onLog = () => {} } = {}) {
  const provider = await startProvider(answers);
  const run = new ThinkRun({ config: { tools: {}, ...config }, providerAddress: provider.address, toolsAddress: provider.address, onLog });
  try {
    await run.start();
    const world = { provider, run, frames: [], frameTimes: [], raw: [] };
    const onFrame = (frame) => {
      world.frames.push(frame);
      world.frameTimes.push(Date.now());
    };
    world.client = await run.connect("c1", { onFrame, onRaw: (data) => world.raw.push(data) });
    world.modelCalls = () => provider.requests.length;
    const started = Date.now();
    world.started = started;
    world.callTimes = () => provider.requests.map((request) => `${((request.atMs - started) / 1000).toFixed(1)} s`).join(", ");
    world.terminals = () => world.frames.filter((frame) => frame.Done || frame.Error);
    world.errors = () => world.frames.filter((frame) => frame.Error).map((frame) => frame.Error.message);
    world.sawToolCall = (id) => world.frames.some((frame) => frame.Chunk?.chunk.type === "tool-call" && frame.Chunk.chunk.id === id);
    world.lastMessage = () => run.store().messages.at(-1);
    return await body(world);
  } finally {
    await run.stop();
    await provider.close();
  }
}

/** The stored tool part of call `id`, anywhere in the transcript. */
export function storedTool(run, id) {
  for (const message of run.store().messages) {
    const part = message.parts.find((candidate) => candidate.call_id === id);
    if (part) return part;
  }
  return null;
}

/** A stored message's text, its parts joined. */
export function textOf(message) {
  return (message?.parts ?? []).filter((part) => part.type === "text").map((part) => part.text).join("");
}
