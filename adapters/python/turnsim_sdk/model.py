"""The model provider, on the harness's side. `host.model.stream(request)`
sends `model_request` (the request the model is shown: `request_id`, `step`,
`continuation`, and the transcript as stored, ids included, so the oracle
can tie the call to the stored messages) and returns the call: an async
iterator of the protocol's chunks as the harness streams them.

The iteration ends after the `finish` chunk or at `model_end` closed,
whichever comes first; a cut ends it with `ModelStreamCut`, an HTTP failure
with `ModelHttpError`, an abandoned call (`call.cancel()`, which sends
`model_cancel`) with `ModelCallCancelled`.
"""

import asyncio
import collections


class ModelStreamCut(ConnectionError):
    """The provider's connection dropped mid-stream."""


class ModelHttpError(Exception):
    def __init__(self, status, message=""):
        text = f"provider error {status}: {message}" if message else f"provider error {status}"
        super().__init__(text)
        self.status = status


class ModelCallCancelled(Exception):
    """The engine abandoned the call."""


class ModelCall:
    def __init__(self, proxy, number):
        self._proxy = proxy
        self.number = number
        self._events = collections.deque()
        self._waiter = None
        self.over = False

    def __aiter__(self):
        return self

    async def __anext__(self):
        while not self._events:
            if self.over:
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
        kind, value = self._events.popleft()
        if kind == "chunk":
            if value.get("type") == "finish":
                self._finish()
            return value
        raise _end_error(value)

    def cancel(self):
        """Abandons the call: `model_cancel`, and the iteration ends with `ModelCallCancelled`."""
        if self.over:
            return
        self._proxy._host.effect({"type": "model_cancel", "call": self.number})
        self._push("end", {"kind": "cancelled"})
        self._finish()

    def _push(self, kind, value):
        self._events.append((kind, value))
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _finish(self):
        self.over = True
        self._proxy._calls.pop(self.number, None)


def _end_error(end):
    kind = end.get("kind")
    if kind == "closed":
        return StopAsyncIteration()
    if kind == "cut":
        return ModelStreamCut("model stream cut: connection closed mid-stream")
    if kind == "cancelled":
        return ModelCallCancelled("the model call was cancelled")
    return ModelHttpError(end.get("status"), end.get("message") or "")


class ModelProxy:
    def __init__(self, host, next_call=None):
        self._host = host
        self._calls = {}
        # The number the next call gets, when `init` gave it (else each call asks).
        self._next_call = next_call

    def stream(self, request):
        """Starts a model call for `request` (the protocol's `ModelRequest`)."""
        if self._next_call is None:
            number = self._host.request({"type": "model_request", "request": request})["call"]
        else:
            number = self._next_call
            self._next_call += 1
            self._host.named({"type": "model_request", "request": request, "call": number})
        call = ModelCall(self, number)
        self._calls[number] = call
        return call

    def chunk(self, number, chunk):
        call = self._calls.get(number)
        if call is not None:
            call._push("chunk", chunk)

    def end(self, number, end):
        call = self._calls.get(number)
        if call is not None:
            call._push("end", end)
            call._finish()
