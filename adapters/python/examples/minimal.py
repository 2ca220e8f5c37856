"""A minimal engine: one user message (or `chat()`) -> one model call ->
text streamed to every connection and the chat callback -> the assistant
message stored -> idle. No tools, no retries, no recovery. A port of
adapters/node/examples/minimal.mjs: on the same scenario and seed its
timeline is byte for byte the Node engine's.

    turnsim run adapters/python/examples/minimal.yaml --engine-cmd "python adapters/python/examples/minimal.py"
"""

import turnsim_sdk  # first: virtual time, seeded randomness

import asyncio

from turnsim_sdk import Write, messages, run_engine


def assistant_message(message_id, text):
    parts = [{"type": "step-start"}] + ([messages.text_part("text-1", text)] if text else [])
    return {"id": message_id, "role": "assistant", "parts": parts}


class Minimal:
    def __init__(self, host):
        self.host = host
        self.next_id = host.store.state["next_id"]
        self.turns = asyncio.Lock()  # one turn at a time, in arrival order
        self.live = None  # the assistant message being streamed, for clients that connect mid-turn

    def new_id(self, prefix):
        self.next_id += 1
        return f"{prefix}{self.next_id}"

    def transcript(self):
        live = [assistant_message(self.live["id"], self.live["text"])] if self.live else []
        return self.host.store.state["messages"] + live

    async def turn(self, text, chat=None):
        async with self.turns:
            host, request_id = self.host, self.new_id("r")
            if chat:
                chat.on_start(request_id)
            user, assistant_id = messages.user_message(self.new_id("m"), text), self.new_id("m")
            host.store.commit([Write.next_id(self.next_id), Write.put_message(user)])
            host.broadcast({"Messages": host.store.state["messages"]})
            kind = "chat" if chat else "user"
            host.observe({"event": "turn-started", "request_id": request_id, "kind": kind, "message_id": assistant_id})
            self.live = {"id": assistant_id, "text": ""}
            # The request carries the transcript as stored, ids included: the oracle ties a call to it by them.
            call = host.model.stream({"request_id": request_id, "step": 1, "continuation": False,
                                      "messages": self.transcript()})
            failure = None
            try:
                async for chunk in call:
                    if chunk["type"] == "error":
                        failure = chunk.get("message") or "model error"
                    if chunk["type"] in ("finish-step", "finish", "error"):
                        continue
                    if chunk["type"] == "text-delta":
                        self.live["text"] += chunk["delta"]
                    host.broadcast({"Chunk": {"request_id": request_id, "message_id": assistant_id, "chunk": chunk}})
                    if chat:
                        chat.on_event(chunk)
            except Exception as error:  # a cut or failed stream ends the turn with an error
                failure = str(error)
            host.store.commit([Write.put_message(assistant_message(assistant_id, self.live["text"]))])
            self.live = None
            if failure:
                host.broadcast({"Error": {"request_id": request_id, "message": failure}})
            else:
                host.broadcast({"Done": {"request_id": request_id, "continuation": False}})
            if chat:
                chat.on_error(failure) if failure else chat.on_done()
            status = "error" if failure else "completed"
            host.observe({"event": "turn-finished", "request_id": request_id, "kind": kind, "status": status})
            if chat:
                chat.returned()

    def connect(self, connection):
        connection.send({"Messages": self.transcript()})

    def user_message(self, text, options):
        return self.turn(text)

    def chat(self, chat, text, options):
        return self.turn(text, chat)


if __name__ == "__main__":
    run_engine(Minimal, fork=True)  # all state lives in the engine object; a forked child per generation
