"""The sandbox: randomness follows the seed (and the generation), and
whatever escapes virtual time or lockstep is fatal, named on stderr."""

import importlib.util
import json
import os
import sys

import pytest

from fake_harness import EngineFault, FakeHarness, engine

PROBE = engine("probe.py")
FORKED = {"PROBE_OPTIONS": json.dumps({"fork": True})}
HERE = os.path.dirname(os.path.abspath(__file__))


def report(messages):
    return json.loads(next(message["text"] for message in messages if message["type"] == "post"))


def draws(harness, seed, generation=1, env=None):
    probe = harness(PROBE, env=env)
    probe.init(seed=seed, generation=generation)
    return report(probe.input({"type": "user_message", "text": "random", "options": {}}))


def test_every_source_of_randomness_follows_the_seed(harness):
    first, again, other = draws(harness, 9), draws(harness, 9), draws(harness, 10)
    assert first == again
    for source in ("random", "uuid4", "uuid1", "urandom", "secrets", "system"):
        assert first[source] != other[source], f"{source} ignores the seed"


def test_string_hashes_are_pinned(harness):
    seen = draws(harness, 1)
    assert seen["hash_seed"] == "0"
    assert draws(harness, 1)["set_order"] == seen["set_order"]


def test_a_restarted_engine_draws_apart_from_its_predecessor(harness):
    first = draws(harness, 5, generation=1)
    second = draws(harness, 5, generation=2)
    assert first["uuid4"] != second["uuid4"], "generation 2 redrew generation 1's ids"
    assert draws(harness, 5, generation=2) == second, "a generation's draws are a function of the seed"


def test_generation_seeds_are_the_ones_the_node_sdk_and_turnsim_engine_derive():
    # Pure arithmetic, loaded from its file: importing the package would install the sandbox in this process.
    spec = importlib.util.spec_from_file_location("seeding", os.path.join(HERE, "..", "turnsim_sdk", "seeding.py"))
    seeding = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(seeding)
    generation_seed = seeding.generation_seed

    with open(os.path.join(HERE, "..", "..", "tests", "fixtures", "generation-seeds.json")) as vectors_file:
        vectors = json.load(vectors_file)
    assert len(vectors) >= 4
    for vector in vectors:
        assert generation_seed(int(vector["seed"]), int(vector["generation"])) == int(vector["derived"]), vector


@pytest.mark.parametrize("escape", ["thread", "socket", "name-lookup", "subprocess", "sleep", "cpu-clock"])
@pytest.mark.parametrize("command", ["escape", "swallow"])
def test_an_escape_is_fatal_even_when_the_engine_catches_it(harness, escape, command):
    probe = harness(PROBE)
    probe.init()
    with pytest.raises(EngineFault, match="engine-crashed"):
        probe.input({"type": "user_message", "text": f"{command} {escape}", "options": {}})
    assert probe.process.wait() == 1
    assert "escapes the harness's virtual time and lockstep" in probe.stderr()


def test_a_package_imported_before_the_sdk_is_refused(harness):
    early = harness(engine("late_import.py"))
    with pytest.raises(EngineFault, match="engine-crashed"):
        early.init()
    assert early.process.wait() == 2
    assert "import turnsim_sdk before anything else; already loaded: pluggy" in early.stderr()


def test_the_harness_side_of_these_tests_is_not_sandboxed():
    # The tests read the real clock (their silence limits): the SDK is imported only by the engines they start.
    assert "turnsim_sdk.sandbox" not in sys.modules
    assert FakeHarness.__module__ == "fake_harness"
