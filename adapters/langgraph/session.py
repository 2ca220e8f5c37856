"""One conversation: a LangGraph thread run by the prebuilt ReAct agent
(`create_react_agent`) over the harness's model, the scenario's tools and
a checkpointer over the harness's store.

LangGraph decides: the steps (model, then the tools it called, until it
stops calling tools), which tool calls run and when (each as its own task),
what a tool's `interrupt()` waits for and what a resume re-runs, what is
checkpointed when (`durability="sync"`: a step's checkpoint is committed
before the next step starts), and how a thread resumes after a crash
(invoking it with no input, when its latest checkpoint has tasks to run).
Ours (glue): the protocol's inputs mapped onto those calls (a user message
is a run with a new human message, a client's result or approval a
`Command(resume=...)` of the interrupt that waits for it), one run at a
time, the transcript projected into the store with every checkpoint,
frames and `chat()` callbacks.
"""

import asyncio

from langchain_core.messages import HumanMessage
from langgraph.graph.message import add_messages
from langgraph.prebuilt import create_react_agent
from langgraph.types import Command

from model import HarnessChatModel
from saver import StoreSaver
from tools import make_tools
from transcript import LiveStep, project, reply_id

THREAD = "conversation"
KEYS_KEY = "lg:chat-keys"  # the `chat()` keys already taken
APPROVALS_KEY = "lg:approvals"  # the client's approval decisions, by call id
QUIET_CHUNKS = {"finish-step", "finish", "error"}  # chunks clients are not sent


class Run:
    """One graph run: a user's turn, or a resume (a result, an approval, a restart)."""

    def __init__(self, request_id, reply, continuation, chat):
        self.request_id = request_id
        self.reply = reply
        self.continuation = continuation
        self.chat = chat
        self.steps = 0
        self.live = None  # the model call streaming now, as a LiveStep


class Session:
    def __init__(self, host):
        self.host = host
        self.tool_kinds = dict(host.config.get("tools") or {})
        self.dynamic = set(host.config.get("dynamic_tools") or [])
        self.next_id = host.store.state["next_id"]
        self.keys = set(host.store.get(KEYS_KEY) or [])
        self.approvals = dict(host.store.get(APPROVALS_KEY) or {})
        self.own_writes = []  # the session's own writes, carried by the next commit
        self.answers = []  # clients' results and approvals not yet handed to the graph: (call id, asks, value)
        self.run = None
        self.turns = asyncio.Lock()  # one graph run at a time, in arrival order
        self.framed = {call_id: state for call_id, (_, state) in self._tool_states(host.store.state["messages"]).items()}
        self.users_framed = self._user_ids(host.store.state["messages"])
        self.saver = StoreSaver(host, self)
        max_steps = host.config.get("max_steps") or 16
        self.config = {"configurable": {"thread_id": THREAD}, "recursion_limit": 2 * max_steps}
        tools = make_tools(self, self.tool_kinds)
        self.graph = create_react_agent(HarnessChatModel(session=self), tools, checkpointer=self.saver)

    # ---- the protocol's inputs ---------------------------------------------

    async def boot(self):
        """As LangGraph documents durable execution: a thread whose latest
        checkpoint still has tasks to run is resumed by invoking it with no
        input. (`state.tasks`, not `state.next`: see docs/langgraph-findings.md.)"""
        state = await self.graph.aget_state(self.config)
        if state.tasks and not state.interrupts:
            async with self.turns:
                await self._drive(None, continuation=True)

    def connect(self, connection):
        connection.send({"Messages": self.live_transcript()})
        failed = self.host.store.state.get("terminal_status")
        if failed and self.run is None:  # the last run failed: a client that comes later is told too
            connection.send({"Error": {"request_id": failed["request_id"], "message": failed["message"]}})

    def resume_request(self, connection):
        if self.run is None:
            return connection.send("ResumeNone")
        connection.held = self.run.request_id
        return connection.send({"StreamResuming": {"request_id": self.run.request_id}})

    def resume_ack(self, connection, request_id):
        if connection.held == request_id:
            connection.held = False
            connection.send({"Messages": self.live_transcript()})

    async def user_message(self, text, options):
        await self._turn(text, None)

    async def chat(self, chat, text, options):
        if chat.key is not None:
            if chat.key in self.keys:  # the same call delivered twice is taken once
                self.host.observe({"event": "chat-repeated", "key": chat.key})
                return chat.returned()
            self.keys.add(chat.key)
            self.own_writes.append({"Put": {"key": KEYS_KEY, "value": sorted(self.keys)}})
        await self._turn(text, chat)

    def deliver(self, delivery, text):
        self.host.log(f"delivery {delivery} ignored: LangGraph has no messenger (capabilities.json)")

    async def tool_result(self, result, auto_continue):
        await self._answer(result["call_id"], "result", result["outcome"])

    async def approval(self, call_id, approved, auto_continue):
        await self._answer(call_id, "approval", bool(approved))

    async def _answer(self, call_id, asks, value):
        """A client's answer resumes the interrupt that waits for it. While a
        run is going, the run takes it when the graph next stops (a step's
        other tasks may still be running): its request goes on with it."""
        self.answers.append((call_id, asks, value))
        if self.run is not None:
            return
        async with self.turns:
            command = await self._resume_answers()
            if command is not None:
                await self._drive(command, continuation=True)

    # ---- runs ----------------------------------------------------------------

    def new_id(self, prefix):
        self.next_id += 1
        self.own_writes.append({"NextId": self.next_id})
        return f"{prefix}{self.next_id}"

    async def _turn(self, text, chat):
        async with self.turns:
            request_id, user_id = self.new_id("r"), self.new_id("m")
            reply = self.new_id("m")
            if chat:
                chat.on_start(request_id)
            self.host.observe({"event": "turn-started", "request_id": request_id, "kind": "chat" if chat else "user",
                               "message_id": reply})
            message = HumanMessage(text, id=user_id)
            await self._drive({"messages": [message]}, continuation=False, chat=chat, request_id=request_id,
                              reply=reply)

    async def _drive(self, graph_input, *, continuation, chat=None, request_id=None, reply=None):
        """One graph run, to its end or its next interrupt; its stream ends with `Done` or `Error`."""
        request_id = request_id or self.new_id("r")
        reply = reply or self._last_reply()
        self.run = Run(request_id, reply, continuation, chat)
        if self.host.store.state.get("terminal_status"):
            self.own_writes.append({"Terminal": None})  # the failure told is over: a new run goes on
        failure = None
        try:
            while graph_input is not False:
                async for _ in self.graph.astream(graph_input, self.config, stream_mode="updates",
                                                  durability="sync"):
                    pass
                graph_input = await self._resume_answers() or False
        except Exception as error:  # the run failed (the model's stream, the store): its clients are told
            failure = str(error) or type(error).__name__
        self.run = None
        if failure:
            # What a failed step streamed was never stored: clients are shown the transcript as stored.
            self.host.broadcast({"Messages": self.live_transcript()})
            self.host.broadcast({"Error": {"request_id": request_id, "message": failure}})
            users = self._user_ids(self.host.store.state["messages"])
            status = {"request_id": request_id, "message": failure, "user_message": users[-1] if users else None}
            self.host.store.commit(self.own_writes + [{"Terminal": status}])  # refused, it is only not kept
            self.own_writes = []
        else:
            self.host.broadcast({"Done": {"request_id": request_id, "continuation": continuation}})
        if chat:
            chat.on_error(failure) if failure else chat.on_done()
            chat.returned()
        self.host.observe({"event": "turn-finished", "request_id": request_id, "kind": "chat" if chat else "user",
                           "status": "error" if failure else "completed"})

    async def _resume_answers(self):
        """The `Command` resuming every interrupt an answer received so far
        waits for (None if none does: the answers are late, doubled or for
        calls nobody asked about, and are dropped)."""
        answers, self.answers = self.answers, []
        if not answers:
            return None
        waiting = {(each.value.get("call_id"), each.value.get("asks")): each.id
                   for each in (await self.graph.aget_state(self.config)).interrupts}
        resume = {}
        for call_id, asks, value in answers:
            interrupt_id = waiting.pop((call_id, asks), None)
            if interrupt_id is None:
                self.host.observe({"event": "tool-ignored", "call_id": call_id})
                continue
            resume[interrupt_id] = value
            if asks == "approval":
                self.approvals[call_id] = value
                self.own_writes.append({"Put": {"key": APPROVALS_KEY, "value": dict(self.approvals)}})
        return Command(resume=resume) if resume else None

    def _last_reply(self):
        users = self._user_ids(self.host.store.state["messages"])
        return reply_id(users[-1]) if users else None

    # ---- the model and the server tools, for the graph ---------------------------

    def start_model_call(self, messages):
        run = self.run
        run.steps += 1
        run.live = LiveStep()
        shown = project(messages, self.tool_kinds, self.approvals, self.dynamic)
        if not shown or shown[-1]["id"] != run.reply:
            shown.append({"id": run.reply, "role": "assistant", "parts": []})
        shown[-1]["parts"].append({"type": "step-start"})
        request = {"request_id": run.request_id, "step": run.steps, "continuation": run.continuation,
                   "messages": shown}
        return self.host.model.stream(request)

    def model_chunk(self, chunk):
        run = self.run
        run.live.take(chunk)
        if chunk["type"] in QUIET_CHUNKS:
            return
        if chunk["type"] in ("tool-input-start", "tool-call") and chunk.get("name") in self.dynamic:
            chunk = {**chunk, "dynamic": True}  # a tool defined at run time, as clients are told of one
        self.host.broadcast({"Chunk": {"request_id": run.request_id, "message_id": run.reply, "chunk": chunk}})
        if run.chat:
            run.chat.on_event(chunk)

    def model_layout(self):
        return self.run.live.layout()

    async def run_server_tool(self, call):
        self.host.observe({"event": "server-tool-started", "call_id": call["call_id"]})
        return await self.host.run_server_tool(self.run.request_id, call)

    # ---- the store and the clients -----------------------------------------------

    def riders(self, config, checkpoint, pending):
        """What a checkpoint commit carries along: the session's own writes,
        and the stored messages the graph's messages as of that commit change."""
        writes, self.own_writes = self.own_writes, []
        if config["configurable"].get("checkpoint_ns", "") != "":
            return writes
        messages = self._messages_after(config, checkpoint, pending)
        stored = {message["id"]: message for message in self.host.store.state["messages"]}
        for message in project(messages, self.tool_kinds, self.approvals, self.dynamic):
            if stored.get(message["id"]) != message:
                writes.append({"PutMessage": message})
        return writes

    def _messages_after(self, config, checkpoint, pending):
        if checkpoint is not None:
            return checkpoint["channel_values"].get("messages", [])
        saved = self.saver.tuple_at(config)
        messages = saved.checkpoint["channel_values"].get("messages", []) if saved else []
        for channel, value in [(write[1], write[2]) for write in (saved.pending_writes if saved else [])] + list(pending):
            if channel == "messages":
                messages = add_messages(messages, value)
        return messages

    def committed(self):
        """After a commit: clients see a new user message, and every tool state the store moved."""
        stored = self.host.store.state["messages"]
        if self.run is not None:
            self.run.live = None
        users = self._user_ids(stored)
        if users != self.users_framed:
            self.users_framed = users
            self.host.broadcast({"Messages": self.live_transcript()})
        for call_id, (tool_name, state) in self._tool_states(stored).items():
            if self.framed.get(call_id) != state:
                self.framed[call_id] = state
                self.host.broadcast({"Tool": {"call_id": call_id, "tool_name": tool_name, "state": state}})

    def live_transcript(self):
        """The stored messages, with the step streaming now in its reply."""
        messages = [dict(message) for message in self.host.store.state["messages"]]
        run = self.run
        if run is None or run.live is None:
            return messages
        reply = next((message for message in messages if message["id"] == run.reply), None)
        if reply is None:
            reply = {"id": run.reply, "role": "assistant", "parts": []}
            messages.append(reply)
        reply["parts"] = list(reply["parts"]) + [dict(part) for part in run.live.parts]
        return messages

    @staticmethod
    def _user_ids(messages):
        return [message["id"] for message in messages if message["role"] == "user"]

    @staticmethod
    def _tool_states(messages):
        return {part["call_id"]: (part["tool_name"], part["state"]) for message in messages
                for part in message["parts"] if part["type"] == "tool"}
