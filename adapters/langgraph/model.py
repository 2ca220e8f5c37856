"""The chat model: a LangChain `BaseChatModel` whose stream comes from the
harness. `_astream` asks the session for a model call (the protocol's
`model_request`, with the transcript the model is shown) and turns each
protocol chunk into the `AIMessageChunk` a provider integration would
yield: text and reasoning deltas, tool-call chunks (LangChain merges their
argument text by index), and the finish reason and usage at `finish-step`.
A cut stream or an HTTP failure is raised from the stream, as a provider's
client raises it.
"""

import json
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel, agenerate_from_stream
from langchain_core.messages import AIMessageChunk
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict


class ModelError(Exception):
    """The provider streamed an `error` chunk."""


class HarnessChatModel(BaseChatModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    session: Any = None  # the Session: `start_model_call(messages)`, `model_chunk(chunk)`, `model_layout()`

    @property
    def _llm_type(self):
        return "turnsim-harness"

    def bind_tools(self, tools, **kwargs):
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        raise NotImplementedError("the harness's model streams, asynchronously only")

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        return await agenerate_from_stream(self._astream(messages, stop, run_manager, **kwargs))

    async def _astream(self, messages, stop=None, run_manager=None, **kwargs):
        call = self.session.start_model_call(messages)
        indexes = {}  # tool call id -> its index among the call's tool-call chunks
        async for chunk in call:
            self.session.model_chunk(chunk)
            message = _message_chunk(chunk, indexes)
            if message is None:
                continue
            generation = ChatGenerationChunk(message=message)
            if run_manager and chunk["type"] == "text-delta":
                await run_manager.on_llm_new_token(chunk["delta"], chunk=generation)
            yield generation
        # The order the parts streamed in (text between tool calls, say), which an AI message
        # loses: its content is one text and its tool calls a list. The stored reply keeps it.
        layout = AIMessageChunk(content="", response_metadata={"turnsim_layout": self.session.model_layout()})
        yield ChatGenerationChunk(message=layout)


def _tool_call_chunk(indexes, call_id, name=None, args=""):
    if call_id not in indexes:
        indexes[call_id] = len(indexes)
        return [{"name": name, "id": call_id, "args": args, "index": indexes[call_id]}]
    return [{"name": None, "id": None, "args": args, "index": indexes[call_id]}]


def _message_chunk(chunk, indexes):
    kind = chunk["type"]
    if kind == "text-delta":
        return AIMessageChunk(content=chunk["delta"])
    if kind == "reasoning-delta":
        return AIMessageChunk(content="", additional_kwargs={"reasoning_content": chunk["delta"]})
    if kind == "tool-input-start":
        return AIMessageChunk(content="", tool_call_chunks=_tool_call_chunk(indexes, chunk["id"], chunk["name"]))
    if kind == "tool-input-delta" and chunk["id"] in indexes:
        return AIMessageChunk(content="", tool_call_chunks=_tool_call_chunk(indexes, chunk["id"], args=chunk["delta"]))
    if kind == "tool-call" and chunk["id"] not in indexes:  # a call whose input was not streamed
        args = json.dumps(chunk.get("input") or {})
        return AIMessageChunk(content="", tool_call_chunks=_tool_call_chunk(indexes, chunk["id"], chunk["name"], args))
    if kind == "finish-step":
        usage = chunk.get("usage") or {}
        tokens_in, tokens_out = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
        return AIMessageChunk(content="", response_metadata={"finish_reason": chunk["reason"]},
                              usage_metadata={"input_tokens": tokens_in, "output_tokens": tokens_out,
                                              "total_tokens": tokens_in + tokens_out})
    if kind == "error":
        raise ModelError(chunk.get("message") or "model error")
    return None
