"""The protocol loop (docs/protocol.md, version 7) and the harness's side
of the pipe as an engine sees it: the `Host`.

One input at a time: the virtual loop runs the engine's work until nothing
is runnable, then `idle` goes out with the earliest timer, the next input is
read with a blocking read, the clock moves to its `now_ns` and the input is
dispatched. The inputs of one instant may come in one `inputs` line: each is
dispatched and settled in turn, answered by its own `idle`, and all of it is
written at once. Requests (`commit`, `model_request`, `fault_point`, `post`,
`exhausted`) write their line and read the reply at once, so the harness
sends nothing else in between; model calls and posts are named from
`init`'s `next_call` and `next_post` when it gives them, and wait for no
reply. Effects wait in a buffer until the next request or the last `idle`
and go out in one write.
"""

import asyncio
import collections
import inspect
import os
import sys
import traceback

from . import loop as virtual_loop
from . import sandbox
from .model import ModelProxy
from .store import Store
from .wire import Wire, exit_with

PROTOCOL_VERSION = 7

# The capabilities of the protocol's vocabulary (docs/protocol.md#capabilities).
CAPABILITIES = ("recovery", "messenger", "provider-retries", "store-refusal-fails-turn", "dangling-call-repair",
                "coalesce")


class PostRefused(Exception):
    """The chat surface refused a post: nothing was shown."""


class HookFailed(Exception):
    """The host's recovery-exhausted hook threw."""


class _RunOver(BaseException):
    """The next `init` (or the end of stdin) came: this run's loop stops."""


def crash(error):
    """An engine's own failure: its traceback on stderr, exit 1."""
    sys.stderr.write("engine failed: " + "".join(traceback.format_exception(error)))
    sys.stderr.flush()
    os._exit(1)


class Connection:
    """A client connection: frames to it are `send` effects while it is open."""

    def __init__(self, host, connection_id):
        self._host = host
        self.id = connection_id
        self.open = True
        # Held for a resume ack: `broadcast` passes it by (its engine sets and clears this).
        self.held = False

    def send(self, frame):
        """Sends one frame (`Frame` JSON); returns whether the connection was still open."""
        if self.open:
            self._host.effect({"type": "send", "connection": self.id, "frame": frame})
        return self.open


class Chat:
    """The callback of one `chat()` call; `key` names the call as its caller chose it."""

    def __init__(self, host, chat_id, key):
        self._host = host
        self.id = chat_id
        self.key = key

    def _call(self, call):
        self._host.effect({"type": "callback", "chat": self.id, "call": call})

    def on_start(self, request_id):
        self._call({"on_start": {"request_id": request_id}})

    def on_event(self, chunk):
        self._call({"on_event": {"chunk": chunk}})

    def on_reset(self, text):
        self._call({"on_reset": {"text": text}})

    def on_done(self):
        self._call("on_done")

    def on_error(self, message):
        self._call({"on_error": {"message": message}})

    def on_interrupted(self):
        self._call("on_interrupted")

    def returned(self):
        """The `chat()` call returned: nothing more comes for it."""
        self._call("returned")


class Host:
    """Everything on the harness's side of the pipe, for one run (or generation)."""

    def __init__(self, wire, init):
        self._wire = wire
        self.seed = init["seed"]
        self.generation = init["generation"]
        self.config = init.get("config") or {}
        self.store_may_refuse = init.get("store_may_refuse", True)
        sites = init.get("fault_sites")
        self.fault_sites = None if sites is None else set(sites)
        self.store = Store(self, init.get("state"))
        self.model = ModelProxy(self, init.get("next_call"))
        self.connections = {}
        self._server_tools = {}
        self._posts = {}
        # The number the next post gets, when `init` gave it (else each post asks).
        self._next_post = init.get("next_post")
        self.retired = False

    def now_ms(self):
        """Simulated milliseconds since the run began."""
        return sandbox.clock.now_ns / 1e6

    def request(self, message):
        """Writes a request and returns the reply's value."""
        if self.retired:
            raise _RunOver()
        self._wire.write(message)
        self._wire.flush()
        reply = self._wire.read_message()
        if reply is None:
            exit_with("stdin closed while a request waited for its reply")
        if reply.get("type") != "reply":
            exit_with(f"expected the reply to {message['type']}, got {reply.get('type')}")
        return reply.get("value")

    def named(self, message):
        """Writes a request that names its own number: no reply comes."""
        if self.retired:
            raise _RunOver()
        self._wire.write(message)

    def effect(self, message):
        """Queues an effect (nothing once the run is over: the harness has moved on)."""
        if not self.retired:
            self._wire.write(message)

    def broadcast(self, frame):
        """Sends a frame to every open connection not held, in connection order."""
        for connection in list(self.connections.values()):
            if not connection.held:
                connection.send(frame)

    async def run_server_tool(self, request_id, call):
        """Runs a server tool on the harness; its `ToolOutcome` JSON (None if it died with its process)."""
        future = asyncio.get_running_loop().create_future()
        self._server_tools[(request_id, call["call_id"])] = future
        self.effect({"type": "server_tool", "request_id": request_id, "call": call})
        return await future

    def fault_point(self, site):
        """Whether to take the unlucky path at a fault site (a site switched off never fires: nothing to ask)."""
        if self.fault_sites is not None and site not in self.fault_sites:
            return False
        return bool(self.request({"type": "fault_point", "site": site})["fire"])

    async def post(self, delivery, text):
        """Posts `text` for `delivery`; returns when the surface answers
        (maybe much later: other inputs are handled meanwhile); raises
        `PostRefused` when it refused the post."""
        if self._next_post is None:
            number = self.request({"type": "post", "delivery": delivery, "text": text})["post"]
        else:
            number = self._next_post
            self._next_post += 1
            self.named({"type": "post", "delivery": delivery, "text": text, "post": number})
        future = asyncio.get_running_loop().create_future()
        self._posts[number] = future
        await future

    def exhausted(self, context):
        """Calls the host's `onExhausted` hook; raises `HookFailed` when the hook threw."""
        reply = self.request({"type": "exhausted", "context": context})
        if not reply.get("ok"):
            raise HookFailed(reply.get("error") or "")

    def observe(self, event):
        """An annotation for the timeline (an `EngineEvent`): never judged."""
        self.effect({"type": "observe", "event": event})

    def log(self, *args):
        print(*args, file=sys.stderr)

    def _server_tool_done(self, message):
        future = self._server_tools.pop((message.get("request_id"), message.get("call_id")), None)
        if future is not None and not future.done():
            future.set_result(message.get("outcome"))

    def _post_done(self, message):
        future = self._posts.pop(message.get("post"), None)
        if future is None or future.done():
            return
        if message.get("ok"):
            future.set_result(None)
        else:
            future.set_exception(PostRefused(message.get("error") or ""))


def _spawn(result):
    """A handler's coroutine runs as a task of its own; its failure is a crash."""
    if not inspect.isawaitable(result):
        return
    task = asyncio.ensure_future(result)
    task.add_done_callback(_crash_on_failure)


def _crash_on_failure(task):
    if task.cancelled():
        return
    error = task.exception()
    if error is not None and not isinstance(error, _RunOver):
        crash(error)


def _connection(host, message):
    return host.connections.get(message.get("connection"))


def _connect(host, engine, message):
    connection = Connection(host, message["connection"])
    host.connections[connection.id] = connection
    return _handler(engine, "connect")(connection)


def _disconnect(host, engine, message):
    connection = host.connections.pop(message["connection"], None)
    if connection is not None:
        connection.open = False
    return _handler(engine, "disconnect")(message["connection"])


def _resume_request(host, engine, message):
    connection = _connection(host, message)
    return connection and _handler(engine, "resume_request")(connection)


def _resume_ack(host, engine, message):
    connection = _connection(host, message)
    return connection and _handler(engine, "resume_ack")(connection, message.get("request_id"))


_DISPATCH = {
    "connect": _connect,
    "disconnect": _disconnect,
    "resume_request": _resume_request,
    "resume_ack": _resume_ack,
    "user_message": lambda host, engine, m: _handler(engine, "user_message")(m["text"], m.get("options")),
    "chat": lambda host, engine, m: _handler(engine, "chat")(
        Chat(host, m["chat"], m.get("key")), m["text"], m.get("options")),
    "deliver": lambda host, engine, m: _handler(engine, "deliver")(m["delivery"], m["text"]),
    "tool_result": lambda host, engine, m: _handler(engine, "tool_result")(m["result"], m.get("auto_continue")),
    "approval": lambda host, engine, m: _handler(engine, "approval")(
        m["call_id"], m.get("approved"), m.get("auto_continue")),
    "model_chunk": lambda host, engine, m: host.model.chunk(m["call"], m["chunk"]),
    "model_end": lambda host, engine, m: host.model.end(m["call"], m["end"]),
    "server_tool_done": lambda host, engine, m: host._server_tool_done(m),
    "post_done": lambda host, engine, m: host._post_done(m),
    "timer": lambda host, engine, m: None,  # the loop runs whatever is due
}


def _handler(engine, name):
    """The engine's handler `name`, or one that does nothing."""
    return getattr(engine, name, None) or (lambda *args: None)


class _Run:
    """One run or generation: from its `init` to the next `init` or the end of stdin."""

    def __init__(self, wire, init, make_engine, offers):
        self.wire = wire
        self.init = init
        self.make_engine = make_engine
        self.offers = offers
        self.host = None
        self.engine = None
        self.following = None
        # The rest of an `inputs` line: each waits for the idle of the one before.
        self.batched = collections.deque()

    def serve(self):
        """Serves the run; returns the message that ended it (the next `init`, or None)."""
        init = self.init
        if init.get("protocol") != PROTOCOL_VERSION:
            exit_with(f"protocol {init.get('protocol')} is not spoken here (version {PROTOCOL_VERSION})")
        sandbox.clock.reset(init["wall_base_ms"])
        sandbox.clock.advance_to(init["now_ns"])
        sandbox.reseed(init["seed"], init["generation"])
        self.host = Host(self.wire, init)
        loop = virtual_loop.VirtualLoop(self._idle)
        loop.set_exception_handler(_loop_failure)
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._boot())
        except _RunOver:
            pass
        loop.set_exception_handler(lambda _loop, _context: None)  # what the old run leaves is no fault
        asyncio.set_event_loop(None)
        virtual_loop.dispose(loop)
        return self.following

    async def _boot(self):
        engine = self.make_engine(self.host)
        self.engine = await engine if inspect.isawaitable(engine) else engine
        booted = _handler(self.engine, "boot")()
        if inspect.isawaitable(booted):
            await booted
        await asyncio.get_running_loop().create_future()  # the run lives until the next init

    def _idle(self, next_timer_ns):
        idle = {"type": "idle", "next_timer_ns": next_timer_ns}
        if self.offers is not None:
            idle.update(self.offers)
            self.offers = None
        self.host.effect(idle)
        message = self.batched.popleft() if self.batched else self._read()
        sandbox.clock.advance_to(message.get("now_ns"))
        asyncio.get_event_loop().call_soon(self._dispatch, message)

    def _read(self):
        """The next input from the harness, after writing everything so far."""
        self.wire.flush()
        message = self.wire.read_message()
        if message is None or message.get("type") == "init":
            self.host.retired = True
            self.following = message
            raise _RunOver()
        if message.get("type") != "inputs":
            return message
        inputs = message.get("inputs")
        if not isinstance(inputs, list) or not inputs:
            exit_with("inputs without any input: a batch holds one or more")
        for input_ in inputs:
            if not isinstance(input_, dict):
                exit_with("inputs holds something that is not a message")
            if input_.get("type") in ("inputs", "init"):
                exit_with(f"{input_['type']} inside inputs: a batch holds single inputs")
        self.batched.extend(inputs[1:])
        return inputs[0]

    def _dispatch(self, message):
        kind = message.get("type")
        if kind == "reply":
            exit_with("a reply with no request waiting")
        dispatch = _DISPATCH.get(kind)
        if dispatch is None:
            exit_with(f"a message the protocol does not have: {kind}")
        if self.engine is None:
            exit_with(f"{kind} before the engine booted")
        _spawn(dispatch(self.host, self.engine, message))


def _loop_failure(_loop, context):
    error = context.get("exception")
    crash(error if error is not None else RuntimeError(context.get("message", "event loop failure")))


def run_engine(make_engine, *, capabilities=None, fork=False):
    """Serves an engine on stdin/stdout until stdin closes.

    `make_engine(host)` (a function or a coroutine function) is called at
    every `init` and returns the engine: an object whose methods, every one
    optional and each sync or async, handle the inputs (`boot`, `connect`,
    `disconnect`, `resume_request`, `resume_ack`, `user_message`, `chat`,
    `deliver`, `tool_result`, `approval`).

    With `capabilities` (names from the protocol's vocabulary) the engine
    declares what it implements; without, it declares nothing and is held
    to every scenario.

    With `fork=True` this process is a zygote: it imports everything once
    and never runs an engine itself. Every `init` (a new run, or a run's
    next generation after an eviction) is served by a child forked from it,
    which starts from exactly the memory a new process has after its imports
    (copy on write): nothing of an old generation, the libraries' module
    state included, reaches the next one. The process offers `reinit` and
    `generations`. Without it a process serves one run's generation: the
    harness starts a new process for each.
    """
    offers = {"batches": True}
    if fork:
        offers.update(reinit=True, generations=True)
    if capabilities is not None:
        unknown = [name for name in capabilities if name not in CAPABILITIES]
        if unknown:
            exit_with(f"run_engine: not capabilities of the protocol: {', '.join(map(str, unknown))}")
        offers["capabilities"] = list(capabilities)
    wire = Wire(0, sandbox.protocol_fd)
    message = wire.read_message()
    serve = _serve_forked if fork else _serve_here
    while message is not None:
        if message.get("type") != "init":
            exit_with(f"the first message of a run must be init, got {message.get('type')}")
        message = serve(_Run(wire, message, make_engine, dict(offers)))
    wire.flush()


def _serve_here(run):
    return run.serve()


def _serve_forked(run):
    """Serves `run` in a child forked from this zygote; returns the message that ended it."""
    import gc
    import json

    gc.collect()
    gc.freeze()  # the zygote's objects leave the collector's lists: children copy fewer pages
    read_end, write_end = os.pipe()
    pid = sandbox.real_fork()
    if pid == 0:
        try:
            os.close(read_end)
            following = run.serve()
            run.wire.flush()
            # The message that ended the run goes back to the zygote, which serves it.
            payload = memoryview(json.dumps(following).encode("utf-8") if following is not None else b"")
            while payload:
                payload = payload[os.write(write_end, payload):]
        except BaseException as error:  # the child never returns into the zygote's loop
            crash(error)
        os._exit(0)
    os.close(write_end)
    payload = _read_all(read_end)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        os._exit(code if code > 0 else 1)
    return json.loads(payload) if payload else None


def _read_all(fd):
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)
