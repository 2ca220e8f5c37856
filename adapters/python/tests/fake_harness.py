"""A small fake harness: spawns an engine command and drives it through the
protocol as turnsim does. It answers requests the moment they come (commit:
the store takes the writes unless told to refuse, and a commit with
`no_reply` is taken unanswered where the store refuses nothing;
model_request: the next call number; fault_point: fire at the sites it is
told to; post: the next post number; exhausted: the hook runs; a call or
post the engine named itself, from `init`'s `next_call` and `next_post`,
is taken unanswered and its number checked), records
every line the engine wrote, and turns the faults a harness must catch into
`EngineFault`: a line that is not JSON, a message the protocol does not
have, an exit or a closed stdout before `idle`, a silence past the limit.
"""

import json
import os
import selectors
import subprocess
import sys
import tempfile
import time

PROTOCOL_VERSION = 7
REQUESTS = {"commit", "model_request", "fault_point", "post", "exhausted"}
EFFECTS = {"send", "model_cancel", "server_tool", "callback", "observe", "idle"}
SILENCE_LIMIT_S = 30
HERE = os.path.dirname(os.path.abspath(__file__))

EMPTY_STATE = {"messages": [], "next_id": 0, "continuation_intent": None, "in_flight": None, "incidents": {},
               "alarms": [], "progress": 0, "deliveries": {}, "terminal_status": None}


def engine(name):
    """The command of a test engine in tests/engines/."""
    return [sys.executable, os.path.join(HERE, "engines", name)]


class EngineFault(Exception):
    def __init__(self, kind, detail):
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


class FakeHarness:
    def __init__(self, argv, *, store_may_refuse=True, refuse_commits=False, fire_sites=(), env=None):
        # stderr goes to a file: a pipe nobody reads would block a chatty engine.
        self._stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                        env={**os.environ, **(env or {})})
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.process.stdout, selectors.EVENT_READ)
        self._buffer = b""
        self.now_ns = 0
        self.store_may_refuse = store_may_refuse or refuse_commits
        self.refuse_commits = refuse_commits
        self.fire_sites = set(fire_sites)
        self.next_call = 0
        self.next_post = 0
        self.named = False  # whether `init` gave the engine the next numbers
        self.commits = []  # every batch the store took
        self.transcript = []  # every line the engine wrote

    def init(self, *, seed=0, generation=1, config=None, state=None, wall_base_ms=1_700_000_000_000,
             fault_sites=None, named=False):
        """Starts a run; with `named`, the engine names its calls and posts (from 1)."""
        message = {"type": "init", "protocol": PROTOCOL_VERSION, "seed": seed, "generation": generation,
                   "wall_base_ms": wall_base_ms, "config": config or {}, "state": state or EMPTY_STATE,
                   "store_may_refuse": self.store_may_refuse,
                   "fault_sites": sorted(self.fire_sites) if fault_sites is None else fault_sites}
        self.named = named
        if named:
            message.update(next_call=self.next_call + 1, next_post=self.next_post + 1)
        return self.input(message)

    def input(self, message):
        """Sends one input (with the current `now_ns`) and serves the engine until `idle`; its messages."""
        self.write({**message, "now_ns": self.now_ns})
        return self.until_idle()

    def inputs(self, messages):
        """Sends the inputs of one instant in one `inputs` line; the messages up to each one's idle."""
        stamped = [{**message, "now_ns": self.now_ns} for message in messages]
        self.write({"type": "inputs", "now_ns": self.now_ns, "inputs": stamped})
        return [self.until_idle() for _ in messages]

    def until_idle(self):
        """Serves the engine until `idle`; its messages."""
        messages = []
        while True:
            reply = self.read_message()
            messages.append(reply)
            if reply["type"] == "idle":
                return messages
            if reply["type"] == "commit" and reply.get("no_reply"):
                self._take_unanswered(reply)
            elif reply["type"] == "model_request" and "call" in reply:
                self.next_call = self._take_named("call", reply["call"], self.next_call)
            elif reply["type"] == "post" and "post" in reply:
                self.next_post = self._take_named("post", reply["post"], self.next_post)
            elif reply["type"] in REQUESTS:
                self.write({"type": "reply", "value": self._answer(reply)})

    def _take_named(self, what, number, last):
        if not self.named:
            raise EngineFault("engine-protocol", f"it named its {what} {number}, but `init` gave no numbers")
        if number != last + 1:
            raise EngineFault("engine-protocol", f"it named its {what} {number}, but it is the run's {what} {last + 1}")
        return number

    def timer(self, now_ns):
        self.now_ns = now_ns
        return self.input({"type": "timer"})

    def _take_unanswered(self, commit):
        if self.store_may_refuse:
            raise EngineFault("engine-protocol", "a commit with no_reply in a run whose store may refuse one")
        self.commits.append(commit["writes"])

    def _answer(self, request):
        kind = request["type"]
        if kind == "commit":
            if self.refuse_commits:
                return {"ok": False, "error": "refused"}
            self.commits.append(request["writes"])
            return {"ok": True}
        if kind == "model_request":
            self.next_call += 1
            return {"call": self.next_call}
        if kind == "fault_point":
            return {"fire": request["site"] in self.fire_sites}
        if kind == "post":
            self.next_post += 1
            return {"post": self.next_post}
        return {"ok": True}  # exhausted: the hook ran

    def write(self, message):
        self.write_raw(json.dumps(message) + "\n")

    def write_raw(self, text):
        self.process.stdin.write(text.encode("utf-8"))
        self.process.stdin.flush()

    def read_message(self):
        line = self._read_line()
        if line is None:
            raise EngineFault("engine-crashed", f"it exited before going idle; stderr:\n{self.stderr()}")
        try:
            message = json.loads(line)
        except ValueError:
            raise EngineFault("engine-malformed", f"not JSON: {line[:200]}") from None
        if message.get("type") not in REQUESTS | EFFECTS:
            raise EngineFault("engine-protocol", f"a message the protocol does not have: {message.get('type')}")
        return message

    def _read_line(self):
        deadline = time.monotonic() + SILENCE_LIMIT_S
        while b"\n" not in self._buffer:
            if not self._selector.select(max(0.0, deadline - time.monotonic())):
                raise EngineFault("engine-silent", f"no line within {SILENCE_LIMIT_S} s")
            chunk = os.read(self.process.stdout.fileno(), 1 << 16)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        text = line.decode("utf-8")
        self.transcript.append(text)
        return text

    def silent_for(self, seconds):
        """Whether the engine writes nothing within `seconds` of real time (it must not, once idle)."""
        return not self._buffer and not self._selector.select(seconds)

    def close(self):
        """Closes stdin; the exit code."""
        self.process.stdin.close()
        code = self.process.wait(timeout=SILENCE_LIMIT_S)
        self._selector.close()
        return code

    def stderr(self):
        """What the engine wrote on stderr so far."""
        self._stderr.seek(0)
        return self._stderr.read().decode("utf-8", "replace")

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def text_chunks(text_id, pieces):
    """The protocol chunks of a scripted text answer, then its finish."""
    return ([{"type": "text-start", "id": text_id}]
            + [{"type": "text-delta", "id": text_id, "delta": piece} for piece in pieces]
            + [{"type": "text-end", "id": text_id},
               {"type": "finish-step", "reason": "stop", "usage": {"input_tokens": 10, "output_tokens": len(pieces)}},
               {"type": "finish", "reason": "stop"}])
