"""The sandbox: every clock and source of randomness a Python engine (and
the libraries it loads) could read, replaced by the run's virtual clock and
a generator seeded from the run's seed; and every way out of lockstep
(threads, sockets, subprocesses, forks, blocking sleeps) made fatal.

It installs itself when first imported, and `import turnsim_sdk` imports it
first: a library imported earlier could hold the real `time.monotonic` or
an OS-seeded generator, so the sandbox refuses to start when one is already
loaded. Until `init` arrives the generator runs on seed 0 and the clock at
zero, so work done at import is the same every run.

What is replaced, and how:
    wall clock (time.time/_ns, gmtime, localtime, strftime, ctime,
    clock_gettime(CLOCK_REALTIME), datetime.now/utcnow, date.today)
        -> time-machine swaps the C functions, so a `from datetime import
           datetime` taken anywhere reads the virtual wall clock too
    time.monotonic/_ns, perf_counter/_ns, clock_gettime(monotonic clocks)
        -> the virtual clock
    random (the module's instance), os.urandom, SystemRandom, secrets,
    uuid.uuid1/uuid4, uuid_utils (a Rust extension that reads the OS)
        -> the seeded generator
    str hashes (set iteration order) -> PYTHONHASHSEED=0, by re-executing
        the interpreter once
    local time -> TZ=UTC
    stdout -> stderr (file descriptor 1 too): stdout is the protocol

What is fatal (the process exits 1, naming it, with the stack that did it):
starting a thread, connecting, listening or sending on a socket, a name
lookup, starting a subprocess, forking, a blocking `time.sleep`, reading a
CPU-time clock. Each would let something
run outside the one input the harness is waiting on, or on a clock it does
not own. An engine cannot catch it: the exit is immediate.
"""

import os
import sys

_HASH_SEED = "0"
if os.environ.get("PYTHONHASHSEED") != _HASH_SEED:
    # str hashes are drawn at interpreter start; only a new interpreter can
    # fix them. `orig_argv` is the command line as it was given.
    os.environ["PYTHONHASHSEED"] = _HASH_SEED
    sys.stdout.flush()
    os.execv(sys.executable, list(sys.orig_argv))

import random as _random
import time as _time
import traceback as _traceback
import uuid as _uuid

from .clock import VirtualClock
from .seeding import generation_seed

clock = VirtualClock()
# What os.urandom, SystemRandom and the uuid functions draw from; the random
# module's own instance is reseeded beside it.
rng = _random.Random(0)

# The SDK's own handles on what it takes away from the engine.
real_fork = os.fork
real_perf_counter = _time.perf_counter
protocol_fd = None  # the real stdout, for protocol lines only

# Packages that may be loaded before the sandbox: itself, time-machine, and
# the hooks an interpreter's site setup loads.
_LOADED_BEFORE_OK = {"turnsim_sdk", "time_machine", "_time_machine", "_distutils_hack", "_virtualenv"}


def escape(what):
    """Something left virtual time or lockstep: a fatal, named error."""
    stack = "".join(_traceback.format_stack()[:-1])
    sys.stderr.write(f"sandbox: {what}; it escapes the harness's virtual time and lockstep.\n{stack}")
    sys.stderr.flush()
    os._exit(1)


def reseed(seed, generation=1):
    """A run or generation starts: every generator from (seed, generation)."""
    derived = generation_seed(seed, generation)
    rng.seed(derived)
    _random.seed(derived)
    _uuid7_state.clear()


def _refuse_late_start():
    site_dirs = [path for path in sys.path if path.endswith("site-packages")]
    early = sorted(
        name
        for name, module in list(sys.modules.items())
        if "." not in name
        and name not in _LOADED_BEFORE_OK
        and any(str(getattr(module, "__file__", "") or "").startswith(site) for site in site_dirs)
    )
    if early:
        sys.stderr.write(f"sandbox: import turnsim_sdk before anything else; already loaded: {', '.join(early)}\n")
        os._exit(2)


def _take_stdout():
    global protocol_fd
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr


def _install_local_time():
    os.environ["TZ"] = "UTC"
    _time.tzset()


def _install_clocks():
    import time_machine

    # time-machine's C hooks ask the newest traveller for `time_ns()`: this
    # one answers with the virtual wall clock.
    traveller = time_machine.travel(0, tick=False).start()
    traveller.time_ns = clock.wall_ns
    monotonic_ids = {getattr(_time, name) for name in ("CLOCK_MONOTONIC", "CLOCK_MONOTONIC_RAW", "CLOCK_BOOTTIME")
                     if hasattr(_time, name)}
    cpu_ids = {getattr(_time, name) for name in ("CLOCK_PROCESS_CPUTIME_ID", "CLOCK_THREAD_CPUTIME_ID")
               if hasattr(_time, name)}
    wall_gettime, wall_gettime_ns = _time.clock_gettime, _time.clock_gettime_ns

    def clock_gettime_ns(clock_id):
        if clock_id in monotonic_ids:
            return clock.now_ns
        if clock_id in cpu_ids:
            escape(f"clock_gettime({clock_id}) reads CPU time")
        return wall_gettime_ns(clock_id)

    def clock_gettime(clock_id):
        if clock_id in monotonic_ids:
            return clock.monotonic_s()
        if clock_id in cpu_ids:
            escape(f"clock_gettime({clock_id}) reads CPU time")
        return wall_gettime(clock_id)

    def cpu_time(name):
        return lambda: escape(f"time.{name}() reads CPU time")

    replacements = {
        "monotonic": clock.monotonic_s,
        "monotonic_ns": lambda: clock.now_ns,
        "perf_counter": clock.monotonic_s,
        "perf_counter_ns": lambda: clock.now_ns,
        "clock_gettime": clock_gettime,
        "clock_gettime_ns": clock_gettime_ns,
        "process_time": cpu_time("process_time"),
        "process_time_ns": cpu_time("process_time_ns"),
        "thread_time": cpu_time("thread_time"),
        "thread_time_ns": cpu_time("thread_time_ns"),
        "sleep": lambda seconds: escape(f"time.sleep({seconds}) blocks the process (await asyncio.sleep instead)"),
    }
    for name, replacement in replacements.items():
        setattr(_time, name, replacement)
    _check_clocks()


def _check_clocks():
    """The C-level wall clock must follow the virtual one: a time-machine
    that stopped honouring its traveller would leak the real time."""
    import datetime

    utc = datetime.timezone.utc
    clock.reset(1_000)
    clock.advance_to(5_000_000)
    readings = (_time.time_ns(), datetime.datetime.now(utc))
    clock.reset(0)
    if readings != (1_005_000_000, datetime.datetime(1970, 1, 1, 0, 0, 1, 5_000, tzinfo=utc)):
        sys.stderr.write(f"sandbox: the wall clock does not follow the virtual clock ({readings})\n")
        os._exit(2)


def _seeded_bytes(size):
    return rng.randbytes(size)


def _uuid4():
    return _uuid.UUID(bytes=rng.randbytes(16), version=4)


_UUID_EPOCH_OFFSET = 0x01B21DD213814000  # 100-ns intervals from 1582-10-15 to 1970-01-01


def _uuid1(node=None, clock_seq=None):
    timestamp = clock.wall_ns() // 100 + _UUID_EPOCH_OFFSET
    clock_seq = rng.getrandbits(14) if clock_seq is None else clock_seq
    node = (rng.getrandbits(48) | (1 << 40)) if node is None else node
    fields = (timestamp & 0xFFFFFFFF, (timestamp >> 32) & 0xFFFF, ((timestamp >> 48) & 0x0FFF) | 0x1000,
              ((clock_seq >> 8) & 0x3F) | 0x80, clock_seq & 0xFF, node)
    return _uuid.UUID(fields=fields)


def _uuid6(node=None, clock_seq=None):
    timestamp = clock.wall_ns() // 100 + _UUID_EPOCH_OFFSET
    clock_seq = rng.getrandbits(14) if clock_seq is None else clock_seq
    node = rng.getrandbits(48) if node is None else node
    value = ((timestamp >> 12) & ((1 << 48) - 1)) << 80 | 0x6 << 76 | (timestamp & 0xFFF) << 64
    value |= (0b10 << 62) | (clock_seq & 0x3FFF) << 48 | node
    return _uuid.UUID(int=value)


_uuid7_state = {}


def _uuid7(timestamp=None, nanos=None):
    # RFC 9562 v7: virtual milliseconds, a counter within one millisecond, seeded bits.
    millis = clock.wall_ns() // 1_000_000 if timestamp is None else timestamp * 1000 + (nanos or 0) // 1_000_000
    last_millis, counter = _uuid7_state.get("last", (None, 0))
    counter = counter + 1 if millis == last_millis else rng.getrandbits(41)
    _uuid7_state["last"] = (millis, counter)
    value = (millis & ((1 << 48) - 1)) << 80 | 0x7 << 76 | (counter >> 30) << 64
    value |= (0b10 << 62) | (counter & ((1 << 30) - 1)) << 32 | rng.getrandbits(32)
    return _uuid.UUID(int=value)


def _install_randomness():
    os.urandom = _seeded_bytes
    _random._urandom = _seeded_bytes  # SystemRandom, and so `secrets`
    _uuid.uuid4 = _uuid4
    _uuid.uuid1 = _uuid1
    _install_uuid_utils()
    reseed(0)


def _install_uuid_utils():
    """LangChain's run ids come from `uuid_utils`, which reads the OS clock
    and randomness in Rust: its functions are replaced by seeded ones."""
    import importlib.util

    if importlib.util.find_spec("uuid_utils") is None:
        return
    import uuid_utils
    import uuid_utils.compat

    for name, make in {"uuid1": _uuid1, "uuid4": _uuid4, "uuid6": _uuid6, "uuid7": _uuid7}.items():
        setattr(uuid_utils.compat, name, make)
        setattr(uuid_utils, name, _as_uuid_utils(make, uuid_utils.UUID))


def _as_uuid_utils(make, uuid_type):
    return lambda *args, **kwargs: uuid_type(str(make(*args, **kwargs)))


def _install_guards():
    import socket
    import subprocess
    import threading

    def refuse(what):
        def refused(*args, **kwargs):
            escape(what)

        return refused

    threading.Thread.start = refuse("a thread was started")
    # Creating or binding a socket reaches nothing (urllib3 binds one to ::1 at import to probe for
    # IPv6); connecting, listening and sending do.
    for name in ("connect", "connect_ex", "listen", "sendto", "sendmsg"):
        setattr(socket.socket, name, refuse(f"a socket's {name}"))
    for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "create_connection"):
        setattr(socket, name, refuse(f"socket.{name}"))
    subprocess.Popen.__init__ = refuse("a subprocess was started")
    os.fork = refuse("the process forked")
    for name in ("system", "popen", "posix_spawn", "posix_spawnp"):
        if hasattr(os, name):
            setattr(os, name, refuse(f"os.{name} started a process"))


_refuse_late_start()
_take_stdout()
_install_local_time()
_install_clocks()
_install_randomness()
_install_guards()
