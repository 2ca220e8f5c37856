"""The virtual clock: the only time an engine sees.

Time is `now_ns`, the simulated nanoseconds since the run began, moved to
the `now_ns` of each input the harness sends (never back). The wall clock
is `wall_base_ms` (from `init`) plus that. Timers are not kept here: the
virtual event loop (loop.py) keeps them, and reads its time from this clock.
"""


class VirtualClock:
    def __init__(self):
        self.now_ns = 0
        self.wall_base_ms = 0

    def reset(self, wall_base_ms):
        """A new run or generation: time zero at `wall_base_ms`."""
        self.now_ns = 0
        self.wall_base_ms = wall_base_ms

    def advance_to(self, now_ns):
        """Moves to an input's time; an input from the past leaves it where it is."""
        if isinstance(now_ns, int) and now_ns > self.now_ns:
            self.now_ns = now_ns

    def wall_ns(self):
        """Wall-clock nanoseconds since the Unix epoch."""
        return self.wall_base_ms * 1_000_000 + self.now_ns

    def monotonic_s(self):
        return self.now_ns / 1e9

    def wall_s(self):
        return self.wall_ns() / 1e9
