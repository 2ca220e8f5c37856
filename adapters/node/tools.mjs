// The AI SDK tool set for a scenario's `EngineConfig.tools`, for an engine
// built on the AI SDK: a server tool runs on the harness (`server_tool` /
// `server_tool_done`) when the SDK executes it, an approval tool is a server
// tool with `needsApproval`, and a client or human tool has no `execute`,
// so the AI SDK leaves its call for the client (a `client_approval` tool:
// `needsApproval` and no `execute`). A tool the model calls that the config
// does not list is a client tool, as in the built-in engine: the set answers
// for any name. A tool in `EngineConfig.dynamic_tools` is a `dynamicTool`
// (defined at run time, as MCP tools are): the AI SDK streams and keeps its
// calls as `dynamic-tool` parts.

import { dynamicTool, jsonSchema, tool } from "ai";

const ANY_OBJECT = jsonSchema({ type: "object", additionalProperties: true });

/** The `ToolOutcome` JSON as what `execute` returns or throws. */
function settle(outcome) {
  if (outcome && "Output" in outcome) return outcome.Output;
  const text = outcome && "Error" in outcome ? outcome.Error : null;
  throw new Error(text ?? "the server tool died with its process");
}

/**
 * The tool set for `config.tools`. `requestId()` names, when a server tool
 * runs, the request it runs for (an engine may build the set once, or once
 * per request).
 */
export function aiSdkTools(host, config, requestId) {
  const dynamic = new Set(config.dynamic_tools ?? []);
  const make = (name, kind) => {
    const define = dynamic.has(name) ? dynamicTool : tool;
    if (isClientKind(kind)) {
      // No `execute`: the AI SDK leaves the call for the client (after its approval, for `client_approval`).
      return define({ description: name, inputSchema: ANY_OBJECT, needsApproval: kind === "client_approval" });
    }
    const execute = async (input, { toolCallId }) => {
      host.observe({ event: "server-tool-started", call_id: toolCallId });
      const call = { call_id: toolCallId, tool_name: name, input: input ?? {} };
      return settle(await host.runServerTool(requestId(), call));
    };
    return define({ description: name, inputSchema: ANY_OBJECT, execute, needsApproval: kind === "approval" });
  };
  const declared = Object.fromEntries(Object.entries(config.tools ?? {}).map(([name, kind]) => [name, make(name, kind)]));
  const undeclared = new Map();
  const lookup = (name) => {
    if (typeof name !== "string") return undefined;
    if (name in declared) return declared[name];
    if (!undeclared.has(name)) undeclared.set(name, make(name, "client"));
    return undeclared.get(name);
  };
  return new Proxy(declared, {
    get: (target, name) => (typeof name === "string" ? lookup(name) : Reflect.get(target, name)),
    has: (target, name) => typeof name === "string" || Reflect.has(target, name),
    getOwnPropertyDescriptor: (target, name) => {
      if (name in target || typeof name !== "string") return Reflect.getOwnPropertyDescriptor(target, name);
      return { value: lookup(name), writable: true, enumerable: false, configurable: true };
    },
  });
}

/** Whether the config names `toolName` a tool the client answers. */
export function isClientTool(config, toolName) {
  return isClientKind(config.tools?.[toolName] ?? "client");
}

function isClientKind(kind) {
  return kind === "client" || kind === "human" || kind === "client_approval";
}
