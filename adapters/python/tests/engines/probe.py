"""A test engine that reports what it sees: each user message is a command,
and its answer a messenger post of JSON (or a fault, for the commands that
break out of the sandbox on purpose)."""

import turnsim_sdk  # first

import asyncio
import datetime
import json
import os
import random
import secrets
import socket
import subprocess
import sys
import threading
import time
import uuid

from turnsim_sdk import run_engine

seen = []  # module state: what this process's engine instances have seen


def clock_report():
    return {"time_ns": time.time_ns(), "now": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "today": datetime.date.today().isoformat(), "localtime": time.strftime("%H:%M:%S"),
            "monotonic_ns": time.monotonic_ns(), "perf_counter_ns": time.perf_counter_ns(),
            "loop_ns": round(asyncio.get_running_loop().time() * 1e9)}


def random_report():
    return {"random": random.random(), "uuid4": str(uuid.uuid4()), "uuid1": str(uuid.uuid1()),
            "urandom": os.urandom(4).hex(), "secrets": secrets.token_hex(4), "system": random.SystemRandom().random(),
            "set_order": list({"alpha", "beta", "gamma", "delta", "epsilon"}), "hash_seed": os.environ["PYTHONHASHSEED"]}


ESCAPES = {
    "thread": lambda: threading.Thread(target=print).start(),
    "socket": lambda: socket.socket().connect(("127.0.0.1", 9)),
    "name-lookup": lambda: socket.getaddrinfo("localhost", 80),
    "subprocess": lambda: subprocess.run(["true"]),
    "sleep": lambda: time.sleep(0.01),
    "cpu-clock": lambda: time.process_time(),
}


class Probe:
    def __init__(self, host):
        self.host = host

    async def report(self, value):
        await self.host.post("probe", json.dumps(value))

    async def user_message(self, text, options):
        command, _, argument = text.partition(" ")
        host = self.host
        if command == "clock":
            return await self.report(clock_report())
        if command == "sleep":
            await asyncio.sleep(int(argument) / 1000)
            return await self.report(clock_report())
        if command == "timeout":
            try:
                await asyncio.wait_for(asyncio.get_running_loop().create_future(), 0.25)
            except TimeoutError:
                return await self.report({"timed_out_ns": time.monotonic_ns()})
        if command == "random":
            return await self.report(random_report())
        if command == "executor":
            name = await asyncio.get_running_loop().run_in_executor(None, lambda: threading.current_thread().name)
            return await self.report({"thread": name})
        if command == "tool":
            outcome = await host.run_server_tool("r1", {"call_id": argument, "tool_name": "t", "input": {}})
            return await self.report({"outcome": outcome})
        if command == "fault":
            return await self.report({"fire": host.fault_point(argument)})
        if command == "commit":
            return await self.report(host.store.commit([{"Put": {"key": "k", "value": argument}}]))
        if command == "exhausted":
            try:
                host.exhausted({"request_id": "r1"})
                return await self.report({"hook": "ran"})
            except turnsim_sdk.HookFailed as error:
                return await self.report({"hook": f"failed: {error}"})
        if command == "model":
            return await self.report(await self.model_call())
        if command == "escape":
            ESCAPES[argument]()
            return await self.report({"escaped": argument})  # must never be reached
        if command == "swallow":
            try:
                ESCAPES[argument]()
            except BaseException:  # an engine that catches everything still cannot go on
                pass
            return await self.report({"escaped": argument})
        if command == "crash":
            raise RuntimeError("the probe crashed on purpose")
        if command == "remember":
            seen.append(argument)
            return await self.report({"generation": host.generation, "seen": seen})
        if command == "later":
            asyncio.get_running_loop().call_later(1.0, seen.append, "timer fired")
            return None
        if command == "pending":
            await host.run_server_tool("r9", {"call_id": "late", "tool_name": "t", "input": {}})
            seen.append("late tool")
            return await self.report({"late": True})
        return await self.report({"unknown": text})

    async def model_call(self):
        call = self.host.model.stream({"request_id": "r1", "step": 1, "continuation": False, "messages": []})
        chunks = []
        try:
            async for chunk in call:
                chunks.append(chunk["type"])
        except Exception as error:  # the report says how the stream ended
            return {"chunks": chunks, "ended": type(error).__name__, "message": str(error)}
        return {"chunks": chunks, "ended": "closed"}


if __name__ == "__main__":
    options = json.loads(os.environ.get("PROBE_OPTIONS", "{}"))
    run_engine(Probe, **options)
