"""Lean LIBERO stepping changes no result: the same episode stepped with and without it gives the same simulator
state, bit for bit, at every step (hard and soft resets), and the same success, robot state and scene."""

import numpy as np
import pytest

from sgvla.libero.expert import task_expert
from sgvla.libero.stepping import READ_OBSERVABLES

pytestmark = pytest.mark.sim


def state(backend) -> dict[str, np.ndarray]:
    """What MuJoCo integrates from and what every reader sees: state, controls, warm start, derived quantities."""
    d = backend.sim.data._data
    return {name: np.array(getattr(d, name)) for name in
            ("qpos", "qvel", "act", "time", "ctrl", "qacc_warmstart", "qacc", "xpos", "xquat", "site_xpos",
             "sensordata", "qfrc_bias")}


@pytest.mark.parametrize("profile", ["fast", "reference"])
def test_lean_step_is_bit_identical(backends, profile):
    lean = backends(0, render_images=False, render_profile=profile)
    plain = backends(0, render_images=False, render_profile=profile, lean_step=False)
    for seed in (0, 1):
        lean.reset(seed)
        plain.reset(seed)
        expert = task_expert(lean.task_info.problem)
        for step in range(40):
            action = expert.act(lean.scene())
            _, lean_success, lean_done = lean.step(action)
            _, plain_success, plain_done = plain.step(action)
            a, b = state(lean), state(plain)
            differ = [name for name in a if not np.array_equal(a[name], b[name])]
            assert not differ, f"{profile} seed {seed} step {step}: {differ} differ"
            assert (lean_success, lean_done) == (plain_success, plain_done)
        assert np.array_equal(lean.robot_state().positions, plain.robot_state().positions)
        assert np.array_equal(lean.robot_state().eef_quaternion, plain.robot_state().eef_quaternion)
        assert np.array_equal(lean.scene().geoms.centers, plain.scene().geoms.centers)


def test_only_unread_observables_are_off(backends):
    lean = backends(0, render_images=False)
    raw = lean.reset(0).raw
    observables = lean.env._env.env._observables
    on = {name for name, o in observables.items() if o.is_enabled() and o.is_active()}
    assert on == set(READ_OBSERVABLES)
    assert raw["robot_state"]["eef"]["pos"].shape == (3,) and raw["robot_state"]["joints"]["vel"].shape == (7,)
