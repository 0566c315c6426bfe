"""Stepping LIBERO without the work that is not physics, bit for bit the same results.

A LIBERO step is 25 robosuite substeps. Each substep calls ``sim.forward()`` (kinematics for the controller),
the OSC controller calls ``sim.forward()`` again on the same state, and ``sim.step()`` is ``mj_step``, which runs
the whole pipeline a third time before integrating: three collision detections and constraint solves per
substep where one is integrated. After the substeps, the task's success predicate is evaluated three times on the
same state (robosuite's reward, LIBERO's step, LeRobot's step), and every observable robosuite defines is computed,
though LeRobot reads six of them.

:class:`LeanStep`, entered around one env step:

- ``sim.forward()`` computes MuJoCo's position and velocity stages (``mj_step1``: kinematics, Jacobian inputs,
  mass matrix, bias forces: all the controller reads), a ``sim.forward()`` on a state nothing has stepped since is
  skipped, and ``sim.step()`` finishes the substep with ``mj_step2`` (actuation, acceleration, constraints,
  integration). ``mj_step1`` + ``mj_step2`` is MuJoCo's own split of ``mj_step``; the stages are pure functions of
  the state, so every value read between and after them is the one the three full passes gave.
- the success predicate is evaluated once per state reached (memoized on simulation time and ``qpos``).

:func:`disable_unread_observables` stops robosuite from computing observables that nobody reads (LeRobot's
``_format_raw_obs`` reads the end effector pose, gripper and joint state, and the cameras).
``tests/sim/test_lean_step.py`` steps the same episode with and without both and compares the full simulator state.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import mujoco

READ_OBSERVABLES = ("robot0_eef_pos", "robot0_eef_quat", "robot0_gripper_qpos", "robot0_gripper_qvel",
                    "robot0_joint_pos", "robot0_joint_vel")  # what LeRobot's LiberoEnv._format_raw_obs reads


class LeanStep:
    """Context manager for one step of a robosuite env (``env``: the robosuite environment whose ``sim`` steps);
    see the module docstring."""

    def __init__(self, env: Any):
        self.env, self.sim = env, env.sim
        self.model, self.data = self.sim.model._model, self.sim.data._data
        self.pending = False  # mj_step1 ran on the current state; mj_step2 has not
        self._success: tuple[float, bytes, Any] | None = None

    def forward(self) -> None:
        if not self.pending:
            mujoco.mj_step1(self.model, self.data)
            self.pending = True

    def step(self, with_udd: bool = True) -> None:
        if self.pending:
            mujoco.mj_step2(self.model, self.data)
        else:
            mujoco.mj_step(self.model, self.data)
        self.pending = False

    def check_success(self) -> Any:
        key = (float(self.data.time), self.data.qpos.tobytes())
        if self._success is None or self._success[:2] != key:
            self._success = (*key, self._check_success())
        return self._success[2]

    def __enter__(self) -> LeanStep:
        self._check_success = self.env._check_success
        self.sim.forward, self.sim.step = self.forward, self.step  # instance attributes shadow MjSim's methods
        self.env._check_success = self.check_success
        return self

    def __exit__(self, *exc: object) -> None:
        del self.sim.forward, self.sim.step, self.env._check_success
        if self.pending:  # a forward no step completed: the rest of the pipeline, as mj_forward would have run it
            mujoco.mj_forward(self.model, self.data)
            self.pending = False


def disable_unread_observables(env: Any, cameras: Iterable[str]) -> list[str]:
    """Turn off every observable of robosuite ``env`` but those LeRobot reads and the ``cameras``' images;
    returns the names turned off."""
    keep = {*READ_OBSERVABLES, *(f"{camera}_image" for camera in cameras)}
    off = [name for name in env._observables if name not in keep]
    for name in off:
        env.modify_observable(name, "enabled", False)
        env.modify_observable(name, "active", False)
    return off
