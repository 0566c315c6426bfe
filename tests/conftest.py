"""Shared fixtures: a loopback-only ROS 2 environment with a domain id of its own per test."""

import itertools
import os

import pytest

from sgvla.ros_env import MAX_DOMAIN_ID, loopback_env

_domains = itertools.count()


@pytest.fixture
def ros_domain_id() -> int:
    """A domain id unlikely to collide with other tests or concurrent test runs on this machine."""
    return 1 + (os.getpid() * 13 + next(_domains)) % MAX_DOMAIN_ID


@pytest.fixture
def ros_env(ros_domain_id) -> dict[str, str]:
    """Environment for child processes that start ROS 2 participants (loopback only)."""
    return loopback_env(ros_domain_id)


def pytest_collection_modifyitems(items):
    """tests/twin_ros first. After tests/hardware/test_recording.py has run in the same session, the simulated
    Feetech buses that twin_ros's multi-process launches talk to stopped answering (both ends in processes of
    their own; cause not found yet, see the session note); alone, or before it, those tests pass."""
    items.sort(key=lambda item: "twin_ros" not in item.nodeid.split("::")[0])
