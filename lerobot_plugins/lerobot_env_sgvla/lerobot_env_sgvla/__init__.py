"""sgvla's suites as LeRobot environments: ``lerobot-eval --env.type=sgvla_libero --env.context_mode=scene_graph``.

LeRobot imports this package by its distribution name (`register_third_party_plugins`, which `lerobot-eval` calls);
importing it registers the env types ``sgvla_libero`` and ``sgvla_so101_twin`` (`lerobot_env_sgvla.configs`). Their
task string is sgvla's live context, rebuilt from the scene every step by sgvla's episode engine
(`lerobot_env_sgvla.env`)."""

import os

# Headless rendering unless the environment says otherwise, as sgvla's workers choose it: MuJoCo picks its GL
# backend when first imported (by the simulators, after this).
os.environ.setdefault("MUJOCO_GL", "egl")

from lerobot_env_sgvla.configs import SgvlaEnvConfig, SgvlaLiberoEnvConfig, SgvlaSo101TwinEnvConfig  # noqa: E402

__all__ = ["SgvlaEnvConfig", "SgvlaLiberoEnvConfig", "SgvlaSo101TwinEnvConfig"]
