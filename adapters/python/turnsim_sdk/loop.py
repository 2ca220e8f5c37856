"""An asyncio event loop on the virtual clock, with no I/O.

`loop.time()` is the sandbox's clock, so `asyncio.sleep`, `call_later`,
`wait_for` and `asyncio.timeout` all run on virtual time. The loop never
polls anything: `BaseEventLoop._run_once` asks its selector for events with
a timeout, and that timeout says what the loop has left to do now:

    under the clock's resolution  callbacks are ready, or a timer is due: go on
    None, or more                 nothing is runnable: the engine is idle

At idle the selector calls `on_idle(next_timer_ns)`, the protocol loop's
turn (write `idle`, read the next input, move the clock, queue the input's
dispatch), and returns no events; `_run_once` then runs what the input made
ready and the timers now due, in that order.

No threads: the default executor runs a function when it is submitted
(LangChain sends every sync callback through `run_in_executor`), and
`call_soon_threadsafe` needs no wake-up, as no other thread exists.
"""

import asyncio
import concurrent.futures

from . import sandbox

# Timers sit on the nanosecond grid (`call_at` rounds them to it), and one
# is due once `when < time() + RESOLUTION_S`: exactly when `now_ns` reaches
# its nanosecond. Half a nanosecond stays above a double's rounding for
# 2^21 s of virtual time (24 days), far past any run.
RESOLUTION_S = 0.5e-9


class InlineExecutor(concurrent.futures.ThreadPoolExecutor):
    """`run_in_executor` without threads: the function runs at submit (the
    loop takes only a `ThreadPoolExecutor` as its default; this one never
    starts a thread)."""

    def submit(self, fn, /, *args, **kwargs):
        future = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as error:  # the awaiting coroutine gets it, whatever it is
            future.set_exception(error)
        return future

    def shutdown(self, wait=True, *, cancel_futures=False):
        pass


class _IdleSelector:
    def __init__(self, loop):
        self._loop = loop

    def select(self, timeout):
        if timeout is None or timeout >= RESOLUTION_S:
            self._loop.went_idle()
        return []

    def close(self):
        pass


class VirtualLoop(asyncio.BaseEventLoop):
    """`on_idle(next_timer_ns)` is called whenever nothing is runnable."""

    def __init__(self, on_idle):
        super().__init__()
        self._selector = _IdleSelector(self)
        self._on_idle = on_idle
        self._clock_resolution = RESOLUTION_S
        self.set_default_executor(InlineExecutor())

    def time(self):
        return sandbox.clock.monotonic_s()

    def call_at(self, when, callback, *args, context=None):
        return super().call_at(round(when * 1e9) / 1e9, callback, *args, context=context)

    def went_idle(self):
        self._on_idle(self.next_timer_ns())

    def next_timer_ns(self):
        """The instant, in ns, at which the earliest timer is due; None without one."""
        # `_run_once` dropped the cancelled handles at the head before selecting.
        if not self._scheduled:
            return None
        return max(round(self._scheduled[0].when() * 1e9), sandbox.clock.now_ns)

    def _process_events(self, event_list):
        pass

    def _write_to_self(self):
        pass

    async def shutdown_default_executor(self, timeout=None):
        pass


def dispose(loop):
    """Drops a finished run's loop: its unfinished coroutines are closed here
    (their `finally` blocks run with no loop running, so nothing they
    schedule runs), and nothing it queued runs again."""
    for task in asyncio.all_tasks(loop):
        task._log_destroy_pending = False
        try:
            task.get_coro().close()
        except BaseException:  # a coroutine that refuses to close is left to the collector
            pass
    loop._ready.clear()
    loop._scheduled.clear()
    loop.close()
