"""sgvla's SO101 MuJoCo twin as a LeRobot robot: ``--robot.type=so101_twin``.

LeRobot's scripts (lerobot-record, -teleoperate, -rollout, ...) import every installed distribution whose name
starts with ``lerobot_robot_`` before they parse their command line; importing this package registers the config.
``python -m lerobot_robot_so101_twin sim-leader`` serves a simulated leader arm for ``--teleop.type=so101_leader``.
"""

import os

# Headless rendering unless the user chose a backend: MuJoCo reads this when it is first imported.
os.environ.setdefault("MUJOCO_GL", "egl")

from .config_so101_twin import SO101TwinConfig  # noqa: E402
from .so101_twin import SO101Twin  # noqa: E402

__all__ = ["SO101Twin", "SO101TwinConfig"]
