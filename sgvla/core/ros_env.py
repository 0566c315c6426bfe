"""Environment for ROS 2 processes that must keep every packet on 127.0.0.1.

Default DDS discovery multicasts on every interface. sgvla's tests, CLI and local launches run
each participant with the loopback-only Fast DDS profile shipped in config/, localhost discovery
and an explicit domain id, so that runs on one machine never reach the network or each other.
"""

import os
from collections.abc import Mapping
from pathlib import Path

from sgvla.paths import CONFIG_DIR

FASTDDS_PROFILE = CONFIG_DIR / "fastdds_localhost.xml"
MAX_DOMAIN_ID = 101  # the portable range of ROS_DOMAIN_ID on Linux is 0..101


def loopback_env(domain_id: int, base: Mapping[str, str] | None = None,
                 profile: Path = FASTDDS_PROFILE) -> dict[str, str]:
    """A copy of `base` (default: os.environ) set up for a loopback-only participant.

    The whole environment is copied on purpose: ros-wheels-bootstrapper marks a re-exec'd
    interpreter and its children must keep its LD_LIBRARY_PATH, or `import rclpy` fails.
    """
    if not 0 <= domain_id <= MAX_DOMAIN_ID:
        raise ValueError(f"ROS domain id {domain_id} outside 0..{MAX_DOMAIN_ID}")
    if not profile.is_file():
        raise FileNotFoundError(f"Fast DDS profile not found: {profile}")
    env = dict(os.environ if base is None else base)
    env.update(
        ROS_DOMAIN_ID=str(domain_id),
        ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
        FASTDDS_DEFAULT_PROFILES_FILE=str(profile),
        RMW_IMPLEMENTATION="rmw_fastrtps_cpp",
    )
    return env


def apply_loopback_env(domain_id: int) -> None:
    """Set the loopback environment in this process; call before rclpy creates a context."""
    os.environ.update(loopback_env(domain_id))
