"""The protocol loop: handshake, lockstep, requests, and the faults a
broken conversation ends in."""

import json

import pytest

from fake_harness import EngineFault, engine, text_chunks

PROBE = engine("probe.py")


def posts(messages):
    return [json.loads(message["text"]) for message in messages if message["type"] == "post"]


def say(harness, text):
    return harness.input({"type": "user_message", "text": text, "options": {}})


def test_init_is_answered_idle_with_the_offers(harness):
    plain = harness(PROBE)
    assert plain.init() == [{"type": "idle", "next_timer_ns": None, "batches": True}]
    forked = harness(PROBE, env={"PROBE_OPTIONS": json.dumps({"fork": True, "capabilities": ["messenger"]})})
    assert forked.init() == [{"type": "idle", "next_timer_ns": None, "batches": True, "reinit": True, "generations": True,
                              "capabilities": ["messenger"]}]
    assert say(forked, "clock")[-1] == {"type": "idle", "next_timer_ns": None}, "offers go on init's idle only"


def test_an_unknown_capability_ends_the_process_before_anything(harness):
    engine_ = harness(PROBE, env={"PROBE_OPTIONS": json.dumps({"capabilities": ["telepathy"]})})
    with pytest.raises(EngineFault, match="engine-crashed"):
        engine_.init()
    assert engine_.process.wait() == 2
    assert "telepathy" in engine_.stderr()


def test_every_input_is_answered_by_idle_and_nothing_follows_it(harness):
    probe = harness(PROBE)
    probe.init()
    for text in ("clock", "random", "executor"):
        assert say(probe, text)[-1]["type"] == "idle"
        assert probe.silent_for(0.05), "nothing may be written after idle"


def test_a_request_waits_for_its_reply_and_effects_go_out_before_it(harness):
    probe = harness(PROBE)
    probe.init()
    messages = probe.input({"type": "user_message", "text": "tool tc-1", "options": {}})
    assert [message["type"] for message in messages] == ["server_tool", "idle"]
    done = probe.input({"type": "server_tool_done", "request_id": "r1", "call_id": "tc-1", "outcome": {"Output": 3}})
    assert posts(done) == [{"outcome": {"Output": 3}}]


def test_commits_are_asked_only_where_the_store_may_refuse(harness):
    asked = harness(PROBE, refuse_commits=True)
    asked.init()
    assert posts(say(asked, "commit v")) == [{"ok": False, "error": "refused"}]
    told = harness(PROBE, store_may_refuse=False)
    told.init()
    messages = say(told, "commit v")
    assert messages[0] == {"type": "commit", "writes": [{"Put": {"key": "k", "value": "v"}}], "no_reply": True}
    assert posts(messages) == [{"ok": True}]


def test_fault_points_are_asked_only_at_sites_switched_on(harness):
    probe = harness(PROBE, fire_sites=["late-alarm"])
    probe.init()
    off = say(probe, "fault store-before-commit")
    assert [message["type"] for message in off] == ["post", "idle"] and posts(off) == [{"fire": False}]
    on = say(probe, "fault late-alarm")
    assert on[0] == {"type": "fault_point", "site": "late-alarm"} and posts(on) == [{"fire": True}]


def test_the_exhausted_hook_is_a_request(harness):
    probe = harness(PROBE)
    probe.init()
    messages = say(probe, "exhausted")
    assert messages[0] == {"type": "exhausted", "context": {"request_id": "r1"}}
    assert posts(messages) == [{"hook": "ran"}]


def test_a_model_call_streams_until_finish_and_ends_as_the_provider_ends_it(harness):
    probe = harness(PROBE)
    probe.init()
    assert say(probe, "model")[0]["type"] == "model_request"
    for chunk in text_chunks("t1", ["a", "b"])[:-1]:
        assert probe.input({"type": "model_chunk", "call": 1, "chunk": chunk})[-1]["type"] == "idle"
    finished = probe.input({"type": "model_chunk", "call": 1, "chunk": {"type": "finish", "reason": "stop"}})
    assert posts(finished) == [{"chunks": ["text-start", "text-delta", "text-delta", "text-end", "finish-step",
                                           "finish"], "ended": "closed"}]
    say(probe, "model")
    probe.input({"type": "model_chunk", "call": 2, "chunk": {"type": "text-start", "id": "t"}})
    cut = probe.input({"type": "model_end", "call": 2, "end": {"kind": "cut"}})
    assert posts(cut)[0]["ended"] == "ModelStreamCut"
    say(probe, "model")
    failed = probe.input({"type": "model_end", "call": 3, "end": {"kind": "http", "status": 503, "message": "busy"}})
    assert posts(failed)[0] == {"chunks": [], "ended": "ModelHttpError", "message": "provider error 503: busy"}


def test_the_inputs_of_one_instant_are_answered_one_idle_each(harness):
    probe = harness(PROBE, fire_sites=["late-alarm"])
    probe.init()
    answers = probe.inputs([{"type": "user_message", "text": text, "options": {}}
                            for text in ("fault late-alarm", "tool tc-1", "random")])
    assert [[message["type"] for message in answer] for answer in answers] == [
        ["fault_point", "post", "idle"], ["server_tool", "idle"], ["post", "idle"]], "a request inside a batch is answered"
    assert probe.silent_for(0.05), "nothing may be written after the last idle"
    alone = harness(PROBE, fire_sites=["late-alarm"])
    alone.init()
    assert [say(alone, text) for text in ("fault late-alarm", "tool tc-1", "random")] == answers, \
        "an input in a batch is handled as if it came alone"


def test_calls_and_posts_named_from_init_wait_for_no_reply(harness):
    probe = harness(PROBE)
    probe.next_call, probe.next_post = 6, 40
    probe.init(named=True)
    started = say(probe, "model")
    assert started[0]["type"] == "model_request" and started[0]["call"] == 7
    assert probe.input({"type": "model_end", "call": 7, "end": {"kind": "closed"}})[0] == {
        "type": "post", "delivery": "probe", "text": json.dumps({"chunks": [], "ended": "closed"}), "post": 41}
    assert say(probe, "model")[0]["call"] == 8, "one number per call, in order"
    asked = harness(PROBE)
    asked.init()
    assert "call" not in say(asked, "model")[0], "without next_call the engine asks"


def test_the_same_inputs_give_the_same_lines_byte_for_byte(harness):
    def session():
        probe = harness(PROBE)
        probe.init(seed=42)
        for text in ("clock", "random", "sleep 1500", "timeout"):
            say(probe, text)
        probe.timer(1_500_000_000)
        probe.timer(1_750_000_000)
        return probe.transcript

    first, second = session(), session()
    assert len(first) > 8
    assert first == second


@pytest.mark.parametrize("line, complaint", [
    ("this is not json\n", "not JSON"),
    ('{"type":"reply","value":null}\n', "a reply with no request waiting"),
    ('{"type":"teleport","now_ns":0}\n', "a message the protocol does not have: teleport"),
    ('[1, 2]\n', "not a message"),
    ('{"type":"inputs","now_ns":0,"inputs":[]}\n', "inputs without any input"),
    ('{"type":"inputs","now_ns":0,"inputs":[{"type":"inputs","now_ns":0,"inputs":[]}]}\n', "inputs inside inputs"),
    ('{"type":"inputs","now_ns":0,"inputs":[{"type":"init","protocol":7}]}\n', "init inside inputs"),
    ('{"type":"inputs","now_ns":0,"inputs":[3]}\n', "not a message"),
])
def test_garbage_from_the_harness_ends_the_process_with_exit_2(harness, line, complaint):
    probe = harness(PROBE)
    probe.init()
    probe.write_raw(line)
    with pytest.raises(EngineFault, match="engine-crashed"):
        probe.read_message()
    assert probe.process.wait() == 2
    assert complaint in probe.stderr()


def test_a_protocol_it_does_not_speak_is_refused(harness):
    probe = harness(PROBE)
    probe.write({"type": "init", "protocol": 5, "now_ns": 0})
    with pytest.raises(EngineFault, match="engine-crashed"):
        probe.read_message()
    assert "protocol 5 is not spoken here" in probe.stderr()


def test_an_engine_that_fails_exits_1_with_its_traceback(harness):
    probe = harness(PROBE)
    probe.init()
    with pytest.raises(EngineFault, match="engine-crashed"):
        say(probe, "crash")
    assert probe.process.wait() == 1
    assert "the probe crashed on purpose" in probe.stderr()


def test_the_engine_exits_when_stdin_closes(harness):
    probe = harness(PROBE)
    probe.init()
    assert probe.close() == 0
