#!/usr/bin/env python3
"""Runs a command as a subreaper and reports, as one JSON line in a file:
its exit code, whether it hung past the limit, its peak memory, and the
processes it left behind (every descendant still there after it exited,
running or a zombie, reparented here). Leftovers are then killed and reaped.
`reaper.py REPORT SECONDS COMMAND...`"""
import ctypes
import json
import os
import resource
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def children_of(pid):
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def main():
    report_path, limit = sys.argv[1], float(sys.argv[2])
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.execvp(sys.argv[3], sys.argv[3:])
    hung = False
    # INTERRUPT_AFTER=S: Ctrl-C twice (as a user who means it), S seconds in.
    interrupt_at = float(os.environ.get("INTERRUPT_AFTER", "inf"))
    while True:
        if time.monotonic() - started > interrupt_at:
            os.kill(pid, signal.SIGINT)
            time.sleep(0.2)
            os.kill(pid, signal.SIGINT)
            interrupt_at = float("inf")
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() - started > limit:
            hung = True
            os.kill(pid, signal.SIGKILL)
            done, status, usage = os.wait4(pid, 0)
            break
        time.sleep(0.01)
    seconds = time.monotonic() - started
    time.sleep(0.2)  # let the tree settle: orphans reparent here
    leftovers = children_of(os.getpid())
    for child in leftovers:
        try:
            os.kill(child, signal.SIGKILL)
        except OSError:
            pass
    for _ in leftovers:
        try:
            os.wait()
        except ChildProcessError:
            break
    report = {
        "exit": os.waitstatus_to_exitcode(status),
        "hung": hung,
        "seconds": round(seconds, 2),
        "peak_kib": max(usage.ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss),
        "leftovers": len(leftovers),
    }
    with open(report_path, "w") as out:
        out.write(json.dumps(report) + "\n")


main()
