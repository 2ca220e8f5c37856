// opencode 1.18.33 calls a provider whose streams all end without a finish
// reason again and again, at once, with no backoff and no bound but the
// agent's `steps` (unlimited by default). Exits 1 while that holds (five
// calls or more within 15 s of one prompt: one was made here every 0.1 to
// 1.4 s, as fast as this machine ran opencode; the fix makes one).
//
// opencode's loop continues after an `unknown` finish by design
// (packages/opencode/src/session/prompt.ts); issue #45315 reports the
// loop, and PR #47079 (open) ends it ("opencode will no longer end up in a
// loop when a stream ends without a finish reason").

import { api, delta, mockProvider, sleep, sse, startOpencode, usage } from "./server.mjs";

const provider = await mockProvider((_index, _body, response) => sse(response, [delta({ role: "assistant", content: "Working on it." }), usage(3)], true));
const opencode = await startOpencode(provider.url);
await api(opencode.base, "POST", `/session/${opencode.session}/prompt_async`, { parts: [{ type: "text", text: "go" }] });
await sleep(15_000);
await api(opencode.base, "POST", `/session/${opencode.session}/abort`, {});
const calls = provider.requests.length;
const gaps = provider.requests.slice(1).map((request, at) => Math.round(request.at - provider.requests[at].at));
console.log(`model calls in 15 s: ${calls}; largest gap between two: ${Math.max(0, ...gaps)} ms`);
console.log('upstream: PR #47079 "With this change, opencode will no longer end up in a loop when a stream ends without a finish reason" (closes #45315)');
opencode.stop();
provider.close();
const holds = calls >= 5;
console.log(holds ? "HOLDS: the provider is called in a loop" : "does not hold: the loop is bounded");
process.exit(holds ? 1 : 0);
