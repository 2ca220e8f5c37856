// opencode 1.18.33 and PR #26167's story: a provider stream cut short
// that ends with no finish reason and zero output tokens (the AI SDK's
// fallback finish `other`, opencode's `unknown`) is not retried: its
// partial text is stored as part of the answer and a new step starts at
// once, with no backoff, and appends to it. Exits 1 while that holds.
//
// opencode's loop continues after an `unknown` finish by design
// (packages/opencode/src/session/prompt.ts: it exits only on a finish that
// is not "tool-calls" or "unknown"); issue #26170 reports the truncated
// answer it keeps, and PR #26167 (open) retries it and discards its parts.

import { api, delta, finish, mockProvider, sse, startOpencode, untilIdle, usage } from "./server.mjs";

const provider = await mockProvider((index, _body, response) => {
  if (index === 0) return sse(response, [delta({ role: "assistant", content: "The answer is for" }), usage(0)], true);
  sse(response, [delta({ role: "assistant", content: "The answer is 42." }), finish("stop"), usage(5)], true);
});
const opencode = await startOpencode(provider.url);
await api(opencode.base, "POST", `/session/${opencode.session}/prompt_async`, { parts: [{ type: "text", text: "what is the answer?" }] });
await untilIdle(opencode.base, opencode.session);
const messages = (await api(opencode.base, "GET", `/session/${opencode.session}/message`)).body;
const stored = messages.filter((message) => message.info.role === "assistant").flatMap((message) => message.parts.filter((part) => part.type === "text").map((part) => part.text));
const gapMs = provider.requests.length > 1 ? Math.round(provider.requests[1].at - provider.requests[0].at) : null;
console.log(`model calls: ${provider.requests.length}; the second ${gapMs} ms after the first`);
console.log(`stored answer texts: ${JSON.stringify(stored)}`);
console.log('upstream: issue #26170 "opencode\'s session processor accepts this as a normal end-of-step, persists a truncated assistant message, and continues"; PR #26167 "surfaces it as a retryable APIError (capped at 3 attempts), and discards the parts the failed attempt persisted"');
opencode.stop();
provider.close();
const holds = stored.some((text) => text.includes("The answer is for"));
console.log(holds ? "HOLDS: the truncated attempt's text is stored in the answer" : "does not hold: the truncated attempt's text was not kept");
process.exit(holds ? 1 : 0);
