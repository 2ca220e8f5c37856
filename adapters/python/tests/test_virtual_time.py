"""Virtual time: every clock an engine can read is the harness's, timers
are requests, and time moves only between inputs."""

import datetime
import json

from fake_harness import engine

PROBE = engine("probe.py")
WALL_BASE_MS = 1_700_000_000_000


def report(messages):
    return json.loads(next(message["text"] for message in messages if message["type"] == "post"))


def say(harness, text):
    return harness.input({"type": "user_message", "text": text, "options": {}})


def test_every_clock_reads_the_inputs_time(harness):
    probe = harness(PROBE)
    probe.init(wall_base_ms=WALL_BASE_MS)
    probe.now_ns = 2_500_000_123
    seen = report(say(probe, "clock"))
    wall = datetime.datetime.fromtimestamp(WALL_BASE_MS / 1000 + 2.5, datetime.timezone.utc)
    assert seen["time_ns"] == WALL_BASE_MS * 1_000_000 + 2_500_000_123
    assert seen["now"] == wall.replace(microsecond=500_000).isoformat()
    assert seen["today"] == wall.date().isoformat()
    assert seen["localtime"] == wall.strftime("%H:%M:%S"), "local time is UTC"
    assert seen["monotonic_ns"] == seen["perf_counter_ns"] == seen["loop_ns"] == 2_500_000_123


def test_a_sleep_is_a_timer_the_harness_fires_at_its_exact_instant(harness):
    probe = harness(PROBE)
    probe.init()
    probe.now_ns = 7
    asked = say(probe, "sleep 1500")
    assert asked == [{"type": "idle", "next_timer_ns": 1_500_000_007}]
    woke = probe.timer(1_500_000_007)
    assert report(woke)["monotonic_ns"] == 1_500_000_007
    assert woke[-1] == {"type": "idle", "next_timer_ns": None}


def test_a_timer_not_yet_due_does_not_fire_and_is_asked_for_again(harness):
    probe = harness(PROBE)
    probe.init()
    say(probe, "sleep 1000")
    probe.now_ns = 999_999_999
    early = say(probe, "clock")
    assert [message["type"] for message in early] == ["post", "idle"]
    assert early[-1]["next_timer_ns"] == 1_000_000_000


def test_wait_for_times_out_on_virtual_time(harness):
    probe = harness(PROBE)
    probe.init()
    assert say(probe, "timeout")[-1]["next_timer_ns"] == 250_000_000
    assert report(probe.timer(250_000_000)) == {"timed_out_ns": 250_000_000}


def test_a_week_of_virtual_time_takes_no_real_time(harness):
    probe = harness(PROBE)
    probe.init()
    week_ms = 7 * 24 * 3600 * 1000
    assert say(probe, f"sleep {week_ms}")[-1]["next_timer_ns"] == week_ms * 1_000_000
    assert report(probe.timer(week_ms * 1_000_000))["monotonic_ns"] == week_ms * 1_000_000


def test_executor_work_runs_inline_on_the_loops_thread(harness):
    probe = harness(PROBE)
    probe.init()
    assert report(say(probe, "executor")) == {"thread": "MainThread"}
