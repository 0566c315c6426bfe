"""`ros2_ws/src/sgvla_ros` installs as a ROS package: a node started outside the source tree, from an install
prefix, finds its parameter file, config and calibration through the package's share directory (ament index)."""

import shutil
import subprocess
import sys

import pytest
import yaml

from sgvla.paths import REPO_ROOT

from ..waiting import read_until

pytestmark = pytest.mark.ros


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    """sgvla and sgvla_ros installed (not editable) into a fresh prefix, built from a copy of the sources."""
    tmp = tmp_path_factory.mktemp("installed")
    src = tmp / "src"
    shutil.copytree(REPO_ROOT / "ros2_ws/src/sgvla_ros", src / "ros2_ws/src/sgvla_ros",
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))  # symlinks become copies
    shutil.copytree(REPO_ROOT / "sgvla", src / "sgvla", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, src / name)
    # --ignore-installed: pip would otherwise uninstall the environment's own (editable) sgvla and sgvla_ros first.
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                           "--ignore-installed", "--no-index", "--prefix", str(tmp / "install"),
                           str(src / "ros2_ws/src/sgvla_ros"), str(src)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tmp / "install"


def installed_env(prefix, ros_env) -> dict:
    site = next(prefix.glob("lib/python3*/site-packages"))
    return {**ros_env, "PYTHONPATH": str(site), "AMENT_PREFIX_PATH": str(prefix)}


def test_the_library_reads_data_from_the_share_directory(prefix, ros_env, tmp_path):
    code = "import sgvla, sgvla.paths as p; print(sgvla.__file__); print(p.CONFIG_DIR); print(p.CALIBRATION_DIR)"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=installed_env(prefix, ros_env),
                         capture_output=True, text=True, timeout=60)
    module, config, calibration = out.stdout.split()
    share = prefix / "share/sgvla_ros"
    assert module.startswith(str(prefix)) and config == str(share / "config") and calibration == str(
        share / "calibration"), out.stdout + out.stderr
    for needed in ("config/ros/hardware.yaml", "config/ros/sim_eval.yaml", "config/eval/default.yaml",
                   "config/ontology/libero_spatial.yaml", "config/fastdds_localhost.xml", "urdf/so101.urdf",
                   "calibration/agentview.yaml", "launch/hardware.launch.py"):
        assert (share / needed).is_file(), needed
    assert (prefix / "bin/so101_twin").is_file() and (prefix / "bin/evaluator").is_file()  # console scripts


def test_a_node_started_outside_the_source_tree_uses_the_installed_files(prefix, ros_env, tmp_path):
    share = prefix / "share/sgvla_ros"
    rig = share / "config/hardware/synthetic.yaml"  # edit the installed copy: the node must report it
    data = yaml.safe_load(rig.read_text())
    camera = next(c for c in data["cameras"] if c["name"] == "agentview")
    camera.update(width=48, height=36)
    rig.write_text(yaml.safe_dump(data))
    cmd = [str(prefix / "bin/camera"), "--ros-args", "-r", "__node:=agentview_camera",
           "--params-file", str(share / "config/ros/hardware.yaml"), "-p", "config:=synthetic",
           "-p", "camera:=agentview"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=installed_env(prefix, ros_env), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        lines = read_until(proc, "48x36", 60)
        assert any("camera agentview (synthetic" in line and "48x36" in line for line in lines), "".join(lines)
        assert not any("no calibration file" in line for line in lines), "".join(lines)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
