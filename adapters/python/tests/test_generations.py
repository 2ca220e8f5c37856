"""Generations in forked children: with `fork=True` every `init` is served
by a child of a zygote that never ran an engine, so nothing of a run or a
generation (module state, timers, work left waiting) reaches the next one,
and a generation started in place says what it says in a new process."""

import json

from fake_harness import engine

PROBE = engine("probe.py")
FORKED = {"PROBE_OPTIONS": json.dumps({"fork": True})}


def posts(messages):
    return [json.loads(message["text"]) for message in messages if message["type"] == "post"]


def say(harness, text):
    return harness.input({"type": "user_message", "text": text, "options": {}})


def test_nothing_of_a_generation_crosses_into_the_next_one(harness):
    probe = harness(PROBE, env=FORKED)
    probe.init(seed=3)
    assert posts(say(probe, "remember a")) == [{"generation": 1, "seen": ["a"]}]
    assert say(probe, "later")[-1]["next_timer_ns"] == 1_000_000_000
    assert [message["type"] for message in say(probe, "pending")] == ["server_tool", "idle"]

    probe.now_ns = 500_000_000
    booted = probe.init(seed=3, generation=2)
    assert booted == [{"type": "idle", "next_timer_ns": None, "batches": True, "reinit": True,
                       "generations": True}], "no old timer"
    late = probe.input({"type": "server_tool_done", "request_id": "r9", "call_id": "late", "outcome": {"Output": 1}})
    assert late == [{"type": "idle", "next_timer_ns": None}], "the old generation's late work writes nothing"
    probe.now_ns = 2_000_000_000
    assert posts(say(probe, "remember b")) == [{"generation": 2, "seen": ["b"]}], "module state starts over"
    assert probe.close() == 0


def test_a_generation_in_place_says_what_it_says_in_a_new_process(harness):
    def script(probe):
        lines = []
        for text in ("remember x", "random", "sleep 300"):
            lines += say(probe, text)
        lines += probe.timer(probe.now_ns + 300_000_000)
        return lines

    in_place = harness(PROBE, env=FORKED)
    in_place.init(seed=11)
    script(in_place)
    in_place.now_ns = 5_000_000_000
    in_place.init(seed=11, generation=2)
    reused = script(in_place)

    fresh = harness(PROBE, env=FORKED)
    fresh.now_ns = 5_000_000_000
    fresh.init(seed=11, generation=2)
    assert script(fresh) == reused


def test_a_run_after_a_run_starts_from_the_seed_as_a_new_process_would(harness):
    probe = harness(PROBE, env=FORKED)
    probe.init(seed=4)
    first = say(probe, "random")
    say(probe, "remember old")
    probe.now_ns = 0
    probe.init(seed=4)
    assert say(probe, "random") == first
    assert posts(say(probe, "remember new")) == [{"generation": 1, "seen": ["new"]}]


def test_a_crashed_child_takes_the_process_down_with_its_code(harness):
    probe = harness(PROBE, env=FORKED)
    probe.init()
    try:
        say(probe, "crash")
    except Exception:  # the harness sees the crash: the process is gone
        pass
    assert probe.process.wait() == 1
    assert "the probe crashed on purpose" in probe.stderr()
