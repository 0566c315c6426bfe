"""The repository keeps the layout the architecture asks for, and the pieces agree with each other."""

import ast
import re
import xml.etree.ElementTree as ET

import pytest

from sgvla.paths import REPO_ROOT

ROS_MODULES = {"rclpy", "sgvla_interfaces", "launch", "launch_ros", "std_msgs", "sensor_msgs",
               "geometry_msgs", "rosidl_runtime_py", "sgvla_ros"}


@pytest.mark.parametrize("path", ["ros2_ws/src/sgvla_interfaces", "ros2_ws/src/sgvla_ros", "launch", "nodes",
                                  "urdf", "calibration", "config", "tests", "benchmarks", "sgvla",
                                  "Dockerfile", "README.md", ".ci/run", "Makefile", "scripts/install.sh"])
def test_layout(path):
    assert (REPO_ROOT / path).exists(), path


def test_no_top_level_tests_package():
    # draccus (a LeRobot dependency) installs a top-level `tests` package into site-packages.
    assert not (REPO_ROOT / "tests" / "__init__.py").exists()


def test_core_library_has_no_ros_imports():
    offenders = []
    for py in (REPO_ROOT / "sgvla").rglob("*.py"):
        for node in ast.walk(ast.parse(py.read_text(), str(py))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{py.relative_to(REPO_ROOT)}: {n}" for n in names if n.split(".")[0] in ROS_MODULES]
    assert not offenders, offenders


def test_ros_package_exposes_the_nodes_folder():
    pkg = REPO_ROOT / "ros2_ws/src/sgvla_ros"
    for link, target in {"sgvla_ros": "nodes", "launch": "launch", "config": "config", "urdf": "urdf",
                         "calibration": "calibration"}.items():
        assert (pkg / link).resolve() == (REPO_ROOT / target).resolve(), link
    assert ET.parse(pkg / "package.xml").findtext("name") == "sgvla_ros"
    from sgvla.launch.nodes import console_scripts

    targets = [entry.split("sgvla_ros.")[1].split(":")[0] for entry in console_scripts()]
    assert targets, "no node executable"
    for module in targets:
        assert (REPO_ROOT / "nodes" / f"{module}.py").is_file(), module


def test_interfaces_package_lists_every_definition():
    pkg = REPO_ROOT / "ros2_ws/src/sgvla_interfaces"
    cmake = (pkg / "CMakeLists.txt").read_text()
    defs = sorted(p.relative_to(pkg).as_posix() for p in [*pkg.glob("msg/*.msg"), *pkg.glob("srv/*.srv"),
                                                          *pkg.glob("action/*.action")])
    listed = sorted(re.findall(r'"((?:msg|srv|action)/\w+\.(?:msg|srv|action))"', cmake))
    assert defs == listed


def test_dockerfile_copies_files_that_exist():
    lines = (REPO_ROOT / "Dockerfile").read_text().splitlines()
    assert any(re.match(r"FROM ros:jazzy", l) for l in lines)
    copies = [l.split()[1:-1] for l in lines if l.startswith("COPY ")]
    assert copies
    for sources in copies:
        for src in sources:
            assert (REPO_ROOT / src).exists(), f"Dockerfile copies missing {src}"


def test_ci_runs_the_readme_test_command():
    readme = (REPO_ROOT / "README.md").read_text()
    ci = (REPO_ROOT / ".ci/run").read_text()
    assert "make test" in readme and re.search(r"^make test$", ci, re.M)


def _launch_nodes(path):
    """(executable, parameter names) of every launch_ros Node(...) in a launch file."""
    for call in ast.walk(ast.parse(path.read_text())):
        if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "Node":
            kw = {k.arg: k.value for k in call.keywords}
            params = [k.value for d in ast.walk(kw.get("parameters", ast.List(elts=[])))
                      if isinstance(d, ast.Dict) for k in d.keys if isinstance(k, ast.Constant)]
            yield kw["executable"].value, params


@pytest.mark.parametrize("launch_file", sorted((REPO_ROOT / "launch").glob("*.launch.py")), ids=lambda p: p.name)
def test_launch_files_name_existing_nodes_and_parameters(launch_file):
    from sgvla.launch.plan import launch_names

    from sgvla.launch.nodes import EXECUTABLES as nodes
    planned = re.search(r'describe\("(\w+)"\)', launch_file.read_text())
    if planned:  # a launch plan's nodes and parameters: tests/ros/test_launch_plan.py checks them
        assert planned.group(1) in launch_names()
        return
    found = list(_launch_nodes(launch_file))
    assert found, f"{launch_file.name} starts no node"
    for executable, params in found:
        assert executable in nodes, f"{launch_file.name}: unknown executable {executable}"
        source = (REPO_ROOT / "nodes" / f"{nodes[executable]}.py").read_text()
        for p in params:
            assert f'declare_parameter("{p}"' in source, f"{executable} declares no parameter {p}"


@pytest.mark.parametrize("launch, page", [("sim_eval", "ros"), ("hardware", "ros"), ("so101_eval", "so101-arm")])
def test_docs_topic_table_is_the_launch_plan(launch, page):
    """Each launch's generated tables live on the docs page that documents the launch."""
    from sgvla.launch.plan import topic_table

    assert topic_table(launch=launch) in (REPO_ROOT / "docs" / f"{page}.md").read_text()
