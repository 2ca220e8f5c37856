"""The scenario's tools (`config.tools`, name -> kind) as LangChain tools,
built the way LangGraph's docs build human-in-the-loop tools:

    server           runs on the harness (`server_tool` / `server_tool_done`)
    client, human    pauses the graph with `interrupt()`; the client's
                     result is the resume value
    approval         `interrupt()` asks the client to approve; approved, it
                     runs on the harness; denied, it is not run
    client_approval  approval first, then the client's result, each an `interrupt()`

Each returns a `ToolMessage` whose artifact carries the outcome as the
harness or the client gave it (any JSON), so the stored tool part holds
exactly that output or error.
"""

from typing import Annotated

from langchain_core.messages import ToolMessage
from langchain_core.tools import InjectedToolCallId, StructuredTool
from langgraph.types import interrupt
from pydantic import BaseModel, ConfigDict


DEFAULT_ERROR_TEXT = "Tool execution denied by user"  # engine/src/transcript.rs: DEFAULT_TOOL_ERROR_TEXT
DIED = "the server tool died with its process"


class AnyInput(BaseModel):
    """A tool's input: whatever object the model called it with."""

    model_config = ConfigDict(extra="allow")
    tool_call_id: Annotated[str, InjectedToolCallId]


def outcome_message(name, call_id, outcome):
    """The `ToolMessage` for a `ToolOutcome` (`{"Output": v}` or `{"Error": text|None}`; None: died with its process)."""
    if outcome is not None and "Output" in outcome:
        output = outcome["Output"]
        content = output if isinstance(output, str) else repr(output)
        return ToolMessage(content, tool_call_id=call_id, name=name, artifact={"output": output})
    # A client's error without a text is stored with the protocol's default text, as the built-in engine does.
    error = DIED if outcome is None else outcome.get("Error") or DEFAULT_ERROR_TEXT
    return ToolMessage(error, tool_call_id=call_id, name=name, status="error", artifact={"error_text": error})


def make_tools(session, tool_kinds):
    return [_make_tool(session, name, kind) for name, kind in sorted(tool_kinds.items())]


def _make_tool(session, name, kind):
    async def run_on_harness(call_id, tool_input):
        outcome = await session.run_server_tool({"call_id": call_id, "tool_name": name, "input": tool_input})
        return outcome_message(name, call_id, outcome)

    async def run(tool_call_id, **tool_input):
        if kind in ("approval", "client_approval"):
            approved = interrupt({"call_id": tool_call_id, "tool_name": name, "asks": "approval"})
            if not approved:
                return ToolMessage("denied by the user", tool_call_id=tool_call_id, name=name, status="error",
                                   artifact={"denied": True})
        if kind in ("server", "approval"):
            return await run_on_harness(tool_call_id, tool_input)
        outcome = interrupt({"call_id": tool_call_id, "tool_name": name, "asks": "result"})
        return outcome_message(name, tool_call_id, outcome)

    return StructuredTool(name=name, description=f"the scenario's {kind} tool {name}", args_schema=AnyInput,
                          coroutine=run)
