"""Every engine a test starts ends with the test."""

import pytest

from fake_harness import FakeHarness


@pytest.fixture
def harness():
    started = []

    def start(argv, **options):
        started.append(FakeHarness(argv, **options))
        return started[-1]

    yield start
    for each in started:
        each.kill()
