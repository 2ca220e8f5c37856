// A small OpenAI-compatible chat-completions provider for the standalone
// repros and the tests (the live runner has its own): each request gets
// the next of a list of scripted answers, streamed as SSE.
//
// An answer is a list of steps: `{ text: "..." }` (one delta),
// `{ call: { id, name, input } }` (a tool call, its arguments in two
// deltas), `{ partialCall: { id, name, argumentsText } }` (a tool call whose
// arguments stop partway), `{ finish: "stop" | "tool_calls" }`, `{ waitMs: n }`, and
// `{ hang: true }` (the connection stays open and silent until the client
// goes away). Requests past the list get the last answer. Every request is
// recorded: its messages and when it came. It is also the stories' tool
// endpoint (`/turnsim/tool`, the app's server tools): every call answers
// `{ Output: "found" }`, and is not counted as a model request.
import http from "node:http";

export async function startProvider(answers) {
  const requests = [];
  const server = http.createServer(async (request, response) => {
    let body = "";
    for await (const piece of request) body += piece;
    if (request.url.endsWith("/turnsim/tool")) {
      return response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ outcome: { Output: "found" } }));
    }
    const index = requests.length;
    requests.push({ atMs: Date.now(), url: request.url, body: safeJson(body) });
    if (!request.url.endsWith("/chat/completions")) return response.writeHead(404).end();
    await stream(response, answers[Math.min(index, answers.length - 1)], index);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    address: `127.0.0.1:${server.address().port}`,
    requests,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); })
  };
}

async function stream(response, steps, index) {
  response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  let open = true;
  response.on("close", () => (open = false));
  const id = `chatcmpl-${index}`;
  const send = (delta, finish = null) =>
    response.write(`data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`);
  let calls = 0;
  for (const step of steps) {
    if (!open) return;
    if (step.text !== undefined) send({ role: "assistant", content: step.text });
    if (step.call) sendCall(send, calls++, step.call);
    if (step.partialCall) sendPartialCall(send, calls++, step.partialCall);
    if (step.waitMs) await new Promise((resolve) => setTimeout(resolve, step.waitMs));
    if (step.hang) return new Promise((resolve) => response.on("close", resolve));
    if (step.finish) {
      send({}, step.finish);
      response.write(`data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 0, model: "m", choices: [], usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } })}\n\n`);
      response.write("data: [DONE]\n\n");
      return response.end();
    }
  }
}

function sendCall(send, index, { id, name, input }) {
  const args = JSON.stringify(input);
  const half = Math.floor(args.length / 2);
  send({ role: "assistant", tool_calls: [{ index, id, type: "function", function: { name, arguments: args.slice(0, half) } }] });
  send({ tool_calls: [{ index, function: { arguments: args.slice(half) } }] });
}

function sendPartialCall(send, index, { id, name, argumentsText }) {
  send({ role: "assistant", tool_calls: [{ index, id, type: "function", function: { name, arguments: argumentsText } }] });
}

function safeJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
