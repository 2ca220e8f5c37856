"""The pipes: one JSON object a line, read from stdin and written to the
protocol's stdout with blocking calls; effects are queued until the engine
asks something or goes idle, then written at once. Blocking is the point:
between two inputs the engine is idle by definition, and a request's reply
is the very next line, so nothing can run in between.
"""

import json
import os
import sys

CHUNK_BYTES = 1 << 16


def exit_with(text, code=2):
    """A broken conversation: say what broke on stderr and end the process."""
    sys.stderr.write(f"protocol: {text}\n")
    sys.stderr.flush()
    os._exit(code)


class Wire:
    def __init__(self, fd_in, fd_out):
        self._in = fd_in
        self._out = fd_out
        self._pending = bytearray()
        self._closed = False
        self._outgoing = []

    def read_line(self):
        """The next line as text, without its newline; None once stdin closed."""
        while True:
            newline = self._pending.find(b"\n")
            if newline >= 0:
                line = bytes(self._pending[:newline])
                del self._pending[: newline + 1]
                return line.decode("utf-8")
            if self._closed:
                if not self._pending:
                    return None
                line = bytes(self._pending)
                self._pending.clear()
                return line.decode("utf-8")
            chunk = os.read(self._in, CHUNK_BYTES)
            if not chunk:
                self._closed = True
            self._pending += chunk

    def read_message(self):
        """The next message (a dict), or None once stdin closed. JSON integers are exact: a u64 seed survives."""
        line = self.read_line()
        if line is None:
            return None
        try:
            message = json.loads(line)
        except ValueError as error:
            exit_with(f"not JSON: {line[:200]} ({error})")
        if not isinstance(message, dict):
            exit_with(f"not a message: {line[:200]}")
        return message

    def write(self, message):
        """Queues one message as one line (sent at the next `flush`)."""
        self._outgoing.append(json.dumps(message, separators=(",", ":"), ensure_ascii=False))

    def flush(self):
        if not self._outgoing:
            return
        data = memoryview(("\n".join(self._outgoing) + "\n").encode("utf-8"))
        self._outgoing.clear()
        while data:
            data = data[os.write(self._out, data):]
