#!/usr/bin/env python3
"""Engines that break the engine protocol, one per fault class: the harness
must end each run with a short, named report, in bounded time and memory,
and leave no process or file behind. `hostile.py MODE`."""
import os
import signal
import sys
import time

IDLE = '{"type":"idle","next_timer_ns":null}\n'


def say(text):
    sys.stdout.write(text)
    sys.stdout.flush()


def boot():
    """Reads `init` and answers it, as a well-behaved engine does."""
    sys.stdin.readline()
    say(IDLE)


def livelock():
    # A server tool asked for on every input: work at one instant, forever.
    boot()
    n = 0
    for line in sys.stdin:
        if '"type":"reply"' in line:
            continue
        n += 1
        say('{"type":"server_tool","request_id":"r","call":{"call_id":"t%d","tool_name":"lookup","input":{}}}\n' % n)
        say(IDLE)


def partial_line():
    boot()
    sys.stdin.readline()
    say("12345678")
    time.sleep(600)


def huge_line():
    boot()
    sys.stdin.readline()
    chunk = "x" * (1 << 20)
    for _ in range(100):
        sys.stdout.write(chunk)
    sys.stdout.flush()
    time.sleep(600)


def exits():
    sys.exit(0)


def garbage():
    sys.stdin.readline()
    say("garbage\n")
    time.sleep(600)


def silent():
    time.sleep(600)


def after_idle():
    # Goes idle, then asks for a commit anyway.
    boot()
    for line in sys.stdin:
        if '"type":"reply"' in line:
            continue
        say(IDLE)
        say('{"type":"commit","writes":[]}\n')


def reply_back():
    # Sends the harness a reply it never asked for.
    boot()
    sys.stdin.readline()
    say('{"type":"reply","value":{"ok":true}}\n')
    time.sleep(600)


def unknown_chat():
    boot()
    sys.stdin.readline()
    say('{"type":"callback","chat":77,"call":"on_done"}\n')
    time.sleep(600)


def two_requests():
    # A second request before the first is answered.
    boot()
    sys.stdin.readline()
    say('{"type":"commit","writes":[]}\n{"type":"commit","writes":[]}\n')
    time.sleep(600)


def misnamed_post():
    # Names its posts itself (no reply to wait for), but not as the world
    # numbers them: the run's first post is 1.
    boot()
    for line in sys.stdin:
        if '"type":"reply"' in line:
            continue
        say('{"type":"post","delivery":"d1","text":"hi","post":99}\n')
        say(IDLE)


def unasked_commit():
    # Commits without waiting for the reply on every input: allowed only
    # in a run whose store refuses nothing (`init` says so).
    for line in sys.stdin:
        if '"type":"reply"' in line:
            continue
        say('{"type":"commit","writes":[],"no_reply":true}\n')
        say(IDLE)


def stubborn():
    # Ignores SIGTERM and the end of its input, and never answers.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.stdin.read()
    time.sleep(600)


def forks():
    # Leaves children behind, then dies.
    for _ in range(3):
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            time.sleep(600)
            os._exit(0)
    sys.exit(3)


def lingers():
    # Speaks the protocol (every input answered with `idle`), then ignores
    # the end of its input and SIGTERM: it must still be gone after the run.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for line in sys.stdin:
        if '"type":"reply"' not in line:
            say(IDLE)
    time.sleep(600)


def stderr_flood():
    # Floods stderr and never answers.
    chunk = "noise " * 10000 + "\n"
    while True:
        sys.stderr.write(chunk)


MODES = {name: fn for name, fn in globals().items() if callable(fn) and name not in ("say", "boot")}

if __name__ == "__main__":
    MODES[sys.argv[1].replace("-", "_")]()
