"""The example engine end to end through turnsim: it passes its scenario,
and its timeline is the Node example's byte for byte on the same scenario
and seed. Needs the release `turnsim` (`cargo build --release -p turnsim`,
or TURNSIM_BIN) and the npm packages (`npm ci --prefix adapters`)."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PYTHON_ENGINE = f"{sys.executable} adapters/python/examples/minimal.py"
NODE_ENGINE = "node adapters/node/examples/minimal.mjs"
SCENARIOS = ["adapters/python/examples/minimal.yaml", "adapters/node/examples/minimal.yaml"]


def turnsim(*args):
    binary = os.environ.get("TURNSIM_BIN", os.path.join(ROOT, "target", "release", "turnsim"))
    if not os.path.exists(binary):
        pytest.fail(f"no turnsim at {binary}: cargo build --release -p turnsim (or set TURNSIM_BIN)")
    return subprocess.run([binary, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def timeline(scenario, seed, engine_cmd):
    """The replay's timeline: every line but the ones that name the engine command."""
    replay = turnsim("replay", scenario, "--seed", str(seed), "--engine-cmd", engine_cmd)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    return [line for line in replay.stdout.splitlines() if engine_cmd not in line]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_example_passes_its_scenario_on_every_seed(scenario):
    run = turnsim("run", scenario, "--engine-cmd", PYTHON_ENGINE)
    assert run.returncode == 0, run.stdout + run.stderr
    assert " 0 failed" in run.stdout and " passed" in run.stdout, run.stdout


@pytest.mark.parametrize("seed", [0, 1, 5])
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_its_timeline_is_the_node_examples_byte_for_byte(scenario, seed):
    if not os.path.isdir(os.path.join(ROOT, "adapters", "node_modules", "ai")):
        pytest.fail("the Node example needs the npm packages: npm ci --prefix adapters")
    python = timeline(scenario, seed, PYTHON_ENGINE)
    assert len(python) > 20, "a replay shows the whole timeline"
    assert python == timeline(scenario, seed, NODE_ENGINE)
