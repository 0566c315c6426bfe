"""Run only by test_tiers.py's grouping test (its name is not test_*.py, so the suite does not collect it): four
tests sharing a module fixture, which notes each worker that sets it up in $SGVLA_GROUPING_PROBE."""

import os

import pytest


@pytest.fixture(scope="module")
def shared():
    with open(os.environ["SGVLA_GROUPING_PROBE"], "a") as f:
        f.write(os.environ.get("PYTEST_XDIST_WORKER", "main") + "\n")
    return True


@pytest.mark.parametrize("n", range(4))
def test_shares_the_module_fixture(shared, n):
    assert shared
