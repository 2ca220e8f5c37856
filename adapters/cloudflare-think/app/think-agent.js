// The app under test: a Durable Object class extending Cloudflare's Think
// (@cloudflare/think 0.23.0, unmodified), the Worker that routes to it, and
// nothing else of ours inside Think. Every run's settings come from the
// text binding TURNSIM_SETTINGS (written by ../settings.mjs):
//
//   { stallTimeoutMs, recovery: { maxAttempts, stableTimeoutMs,
//     noProgressTimeoutMs, terminalMessage }, keepAliveIntervalMs, maxSteps,
//     serverTools: { name: { needsApproval, execute, dynamic } } }
//
// The model is an OpenAI-compatible provider at http://provider.invalid/v1:
// the config's globalOutbound sends every fetch to the runner's provider,
// so no other host is reachable. A server tool's execute posts the call to
// the runner through the TOOLS service binding (`/turnsim/tool`, `{call_id,
// tool_name, input}` → `{outcome: {Output} | {Error}}`, the live bridge's
// contract) and returns what it answers, so each run crosses the boundary.
import { Think } from "@cloudflare/think";
import { routeAgentRequest } from "agents";
import { env } from "cloudflare:workers";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { dynamicTool, jsonSchema, tool } from "ai";

const settings = JSON.parse(env.TURNSIM_SETTINGS);

// Any object: the scenario's tools carry no schema, and the runner's
// provider sends whatever input the scenario scripts.
const anyObject = jsonSchema({ type: "object", additionalProperties: true });

async function runServerTool(name, input, { toolCallId }) {
  const response = await env.TOOLS.fetch("http://tools.invalid/turnsim/tool", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ call_id: toolCallId, tool_name: name, input })
  });
  const { outcome } = await response.json();
  if (outcome && "Error" in outcome) throw new Error(outcome.Error ?? "the tool failed");
  return outcome?.Output;
}

function serverTools() {
  const tools = {};
  for (const [name, { needsApproval, execute, dynamic }] of Object.entries(settings.serverTools)) {
    if (dynamic) {
      // An app's own runtime-defined tool (ai's `dynamicTool`): its chunks say `dynamic: true`.
      tools[name] = dynamicTool({
        description: `the story's dynamic tool ${name}`,
        inputSchema: anyObject,
        execute: (input, options) => runServerTool(name, input, options)
      });
      continue;
    }
    tools[name] = tool({
      description: `the scenario's server tool ${name}`,
      inputSchema: anyObject,
      needsApproval,
      // A client_approval tool has no executor: once approved, the client answers it.
      ...(execute ? { execute: (input, options) => runServerTool(name, input, options) } : {})
    });
  }
  return tools;
}

export class TurnsimThink extends Think {
  // How soon a killed object wakes with no client: Agent reads it from the
  // class, so a getter over the run's settings.
  static get options() {
    return { keepAliveIntervalMs: settings.keepAliveIntervalMs };
  }

  chatStreamStallTimeoutMs = settings.stallTimeoutMs;
  chatRecovery = settings.recovery;
  maxSteps = settings.maxSteps;

  getModel() {
    const provider = createOpenAICompatible({
      name: "turnsim",
      baseURL: "http://provider.invalid/v1",
      apiKey: "not-a-key",
      includeUsage: true
    });
    return provider.chatModel("turnsim-model");
  }

  getSystemPrompt() {
    return "You are the assistant under test.";
  }

  getTools() {
    return serverTools();
  }
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/health") return new Response("ok");
    return (await routeAgentRequest(request, env)) || new Response("Not found", { status: 404 });
  }
};
