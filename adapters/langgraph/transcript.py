"""The transcript in the store's vocabulary (`Message`, `Part`), projected
from the graph's `messages` channel: what the oracle reads, and what
clients and the model are shown.

A human message is a user message (its id is the one the session gave it,
`m<n>`); the AI messages and tool results after it are one assistant
message, the reply, stored as `m<n+1>` (both ids are drawn when the turn
starts). Each AI message is one step: `step-start`, its reasoning and
text, then a tool part for each of its tool calls, in the state its result
(a `ToolMessage`) or the session's record of the client's answers says.
"""

import json

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

APPROVAL_KINDS = {"approval", "client_approval"}


def reply_id(user_id):
    """The stored id of the reply to user message `m<n>`."""
    return f"m{int(user_id[1:]) + 1}"


def text_of(message):
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content if isinstance(block, dict))


def project(messages, tool_kinds, approvals, dynamic=frozenset()):
    """Stored messages for LangChain `messages`. `tool_kinds` names each
    tool's kind (the scenario's config); `approvals` holds the client's
    approval decisions by call id; `dynamic` names the tools defined at run
    time (stored as `dynamic`, as MCP tools are)."""
    results = {message.tool_call_id: message for message in messages if isinstance(message, ToolMessage)}
    stored, reply = [], None
    for message in messages:
        if isinstance(message, HumanMessage):
            stored.append({"id": message.id, "role": "user",
                           "parts": [{"type": "text", "id": "user", "text": text_of(message), "state": "done"}]})
            reply = {"id": reply_id(message.id), "role": "assistant", "parts": []}
        elif isinstance(message, AIMessage) and reply is not None:
            parts = step_parts(message, results, tool_kinds, approvals, len(reply["parts"]))
            if len(parts) == 1:
                continue  # a step that said nothing (an empty finish) leaves no mark, not a lone step-start
            if not reply["parts"]:
                stored.append(reply)
            for part in parts:
                if part["type"] == "tool" and part["tool_name"] in dynamic:
                    part["dynamic"] = True
            reply["parts"] += parts
    return stored


def step_parts(message, results, tool_kinds, approvals, offset):
    """A step's parts in the order they streamed (the layout the model call
    recorded); without one, reasoning, text, then the tool calls."""
    calls = {call["id"]: call for call in message.tool_calls}
    layout = message.response_metadata.get("turnsim_layout")
    if layout is None:
        layout = _plain_layout(message, offset)
    parts = [{"type": "step-start"}]
    for entry in layout:
        if entry["type"] == "tool":
            call = calls.pop(entry["call_id"], None)
            if call is not None:
                parts.append(_tool_of(call, results, tool_kinds, approvals))
        elif entry["text"]:
            parts.append({"type": entry["type"], "id": entry["id"], "text": entry["text"], "state": "done"})
    parts += [_tool_of(call, results, tool_kinds, approvals) for call in calls.values()]
    return parts


def _plain_layout(message, offset):
    reasoning = message.additional_kwargs.get("reasoning_content") or ""
    return [{"type": "reasoning", "id": f"reasoning-{offset + 1}", "text": reasoning},
            {"type": "text", "id": f"text-{offset + 2}", "text": text_of(message)}]


def _tool_of(call, results, tool_kinds, approvals):
    return tool_part(call, results.get(call["id"]), tool_kinds.get(call["name"], "client"), approvals.get(call["id"]))


def tool_part(call, result, kind, approved):
    """A stored tool part for a call, its result (or None) and the client's approval decision (or None)."""
    part = {"type": "tool", "call_id": call["id"], "tool_name": call["name"], "state": "input-available",
            "input_text": json.dumps(call["args"], separators=(",", ":")), "input": call["args"], "output": None,
            "error_text": None, "approval": None, "repaired": False}
    if kind in APPROVAL_KINDS:
        part["approval"] = {"id": call["id"], "approved": approved}
        part["state"] = "approval-requested" if approved is None else "approval-responded"
    if result is None:
        return part
    artifact = result.artifact if isinstance(result.artifact, dict) else {}
    if artifact.get("denied"):
        part["state"] = "output-denied"
    elif result.status == "error":
        part.update(state="output-error", error_text=artifact.get("error_text", text_of(result)))
    else:
        part.update(state="output-available", output=artifact.get("output", text_of(result)))
    return part


class LiveStep:
    """The parts a model call has streamed so far, as a client that saw
    every chunk shows them: the reply's step in progress."""

    def __init__(self):
        self.parts = [{"type": "step-start"}]
        self._open = {}

    def take(self, chunk):
        kind, part_id = chunk["type"], chunk.get("id")
        if kind in ("text-start", "reasoning-start"):
            self._open[part_id] = {"type": kind.split("-")[0], "id": part_id, "text": "", "state": "streaming"}
            self.parts.append(self._open[part_id])
        elif kind in ("text-delta", "reasoning-delta") and part_id in self._open:
            self._open[part_id]["text"] += chunk["delta"]
        elif kind in ("text-end", "reasoning-end") and part_id in self._open:
            self._open.pop(part_id)["state"] = "done"
        elif kind == "tool-input-start":
            self._open[part_id] = {"type": "tool", "call_id": part_id, "tool_name": chunk["name"],
                                   "state": "input-streaming", "input_text": "", "input": None, "output": None,
                                   "error_text": None, "approval": None, "repaired": False}
            self.parts.append(self._open[part_id])
        elif kind == "tool-input-delta" and part_id in self._open:
            self._open[part_id]["input_text"] += chunk["delta"]
        elif kind == "tool-call":
            self._call(chunk)

    def layout(self):
        """The order of what streamed: each text and reasoning with its text, each tool call by id."""
        return [{"type": "tool", "call_id": part["call_id"]} if part["type"] == "tool"
                else {"type": part["type"], "id": part["id"], "text": part["text"]}
                for part in self.parts if part["type"] != "step-start"]

    def _call(self, chunk):
        tool = self._open.pop(chunk["id"], None)
        if tool is None:
            tool = {"type": "tool", "call_id": chunk["id"], "tool_name": chunk["name"], "input_text": "",
                    "output": None, "error_text": None, "approval": None, "repaired": False}
            self.parts.append(tool)
        tool.update(state="input-available", input=chunk.get("input") or {},
                    input_text=json.dumps(chunk.get("input") or {}, separators=(",", ":")))
