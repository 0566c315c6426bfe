"""The launch description agrees with the nodes, the launch file and the parameter file; `sgvla launch`
starts and stops processes cleanly."""

import ast
import os
import re
from itertools import takewhile
from pathlib import Path

import pytest
import yaml

from sgvla.core.settings import specs
from sgvla.launch.nodes import EXECUTABLES, QOS
from sgvla.launch.plan import ARGUMENTS, TOPICS, NodeSpec, Plan, launch_names, launch_plan
from sgvla.paths import REPO_ROOT

from ..children import launch_in_child

pytestmark = pytest.mark.ros

NODES = EXECUTABLES
MINE = ["sim_bridge", "scene_graph", "vla_policy", "evaluator", "bag_recorder"]


def defaults(executable: str) -> dict:
    """Parameter -> default of every `declare_parameter("name", <literal>)` in the node's module, and of every field
    of a settings dataclass it declares (`declare_settings(RecordingSettings)`: sgvla.core.settings)."""
    source = (REPO_ROOT / "nodes" / f"{NODES[executable]}.py").read_text()
    if "(HardwareNode)" in source:  # managed nodes inherit the base's parameters (autostart)
        source += (REPO_ROOT / "nodes" / "runtime.py").read_text()
    tree = ast.parse(source)
    calls = [call for call in ast.walk(tree) if isinstance(call, ast.Call)]
    found = {call.args[0].value: _value(call.args[1], tree) for call in calls
             if getattr(call.func, "attr", "") == "declare_parameter"
             and isinstance(call.args[0], ast.Constant)}  # not the base's own super().declare_parameter(name, ...)
    for call in calls:
        if getattr(call.func, "attr", "") == "declare_settings":
            found.update({s.name: s.default for s in specs(_value(call.args[0], tree))})
    return found


def _value(expression: ast.expr, module: ast.Module):
    """A declared default: a literal, or an expression of the module's imports (a suite's cameras, say)."""
    try:
        return ast.literal_eval(expression)
    except ValueError:
        namespace: dict = {}
        imports = [node for node in module.body if isinstance(node, (ast.Import, ast.ImportFrom))]
        exec(compile(ast.Module(imports, []), "<imports>", "exec"), namespace)
        return eval(compile(ast.Expression(expression), "<default>", "eval"), namespace)


def declared(executable: str) -> set[str]:
    return set(defaults(executable))


VARIANTS = {  # launch arguments that between them start every node a launch can start
    "sim_eval": [{"record": ""}, {"record": "/tmp/never_written_bag"}],
    "hardware": [{}, {"teleop": "leader", "record": "/tmp/never_written_ds", "task": "t"},
                 {"sim": "true", "teleop": "true", "record": "/tmp/never_written_ds"}, {"sim": "true"},
                 {"sim": "true", "perception": "true"}],
    "so101_eval": [{}, {"record": "/tmp/never_written_bag", "cameras": "false"}, {"sim": "true"},
                   {"perception": "true"},
                   {"sim": "true", "record": "/tmp/never_written_bag"}],
}


def all_plans(name: str | None = None):
    assert set(VARIANTS) == set(launch_names())
    for launch in [name] if name else launch_names():
        for args in VARIANTS[launch]:
            yield launch_plan(launch, args)


def test_every_node_executable_and_parameter_exists():
    for plan in all_plans():
        assert plan.params_file.is_file()
        file_params = yaml.safe_load(plan.params_file.read_text())
        for node in plan.nodes:
            assert (REPO_ROOT / "nodes" / f"{EXECUTABLES[node.executable]}.py").is_file()
            names = set(node.parameters) | set(file_params.get(node.name, {}).get("ros__parameters", {}))
            missing = names - declared(node.executable)
            assert not missing, f"{node.executable} declares no parameter(s) {missing}"
        assert plan.main in {n.name for n in plan.nodes}


def test_parameter_file_documents_every_declared_parameter():
    file_params = yaml.safe_load((REPO_ROOT / "config/ros/sim_eval.yaml").read_text())
    text = (REPO_ROOT / "config/ros/sim_eval.yaml").read_text()
    for executable in MINE:
        documented = set(file_params[executable]["ros__parameters"])
        assert documented == declared(executable), executable
        for p in documented:
            assert re.search(rf"^\s+{p}: .*#", text, re.M), f"{executable}.{p} has no comment"


@pytest.mark.parametrize("launch", launch_names())
def test_parameter_files_hold_the_nodes_defaults(launch):
    """The node code's declared defaults are the one table of parameter values; a parameter file repeats them for
    the reader (with comments) and may differ only where a launch argument sets the value on top."""
    for plan in all_plans(launch):
        file_params = yaml.safe_load(plan.params_file.read_text())
        for node in plan.nodes:
            values = file_params.get(node.name, {}).get("ros__parameters", {})
            wrong = {k: (v, defaults(node.executable)[k]) for k, v in values.items()
                     if k not in node.parameters and v != defaults(node.executable)[k]}
            assert not wrong, f"{plan.params_file.name} {node.name}: file value vs node default {wrong}"


@pytest.mark.parametrize("launch", launch_names())
def test_launch_file_describes_its_plan(launch):
    """`ros2 launch` reads the same plan: the file is `describe(<its name>)`, which makes one launch_ros Node
    per planned node (executable, name, parameters and remappings taken from the plan)."""
    tree = ast.parse((REPO_ROOT / "launch" / f"{launch}.launch.py").read_text())
    calls = [call.args[0].value for call in ast.walk(tree) if isinstance(call, ast.Call)
             and getattr(call.func, "id", "") == "describe"]
    assert calls == [launch]
    source = (REPO_ROOT / "nodes" / "launch_description.py").read_text()
    assert "Node(package=PACKAGE, executable=spec.executable, name=spec.name" in source
    assert "remappings=list(spec.remappings), parameters=[str(plan.params_file), spec.parameters]" in source


def test_arguments_reach_the_nodes():
    plan = launch_plan("sim_eval", {"stepping": "free_running", "eval_overrides": "tasks=[0]", "record": "b"})
    assert plan.node("sim_bridge").parameters == {"lockstep": False, "render_images": True,
                                                  "cameras": ["agentview", "robot0_eye_in_hand"],
                                                  "preload": ["sgvla.libero.env"]}
    # The plan's suite sets what the nodes see and load: the twin's cameras, ontology and modules.
    twin = launch_plan("so101_eval", {"sim": "true"})
    assert twin.node("sim_bridge").parameters["cameras"] == ["agentview", "wrist"]
    assert twin.node("sim_bridge").parameters["preload"] == ["sgvla.so101.twin.backend"]
    assert twin.node("vla_policy").parameters["preload"] == ["sgvla.so101.twin.pick_place"]
    assert twin.node("scene_graph").parameters["ontology"] == "so101_tabletop"
    assert plan.node("vla_policy").parameters["lockstep"] is False
    assert plan.node("scene_graph").parameters["overlay"] is True
    assert plan.node("bag_recorder").parameters["output"].endswith("/b")
    ev = plan.node("evaluator").parameters
    assert ev["overrides"] == "tasks=[0]" and ev["wait_for_nodes"] == ["sim_bridge", "scene_graph", "vla_policy",
                                                                       "bag_recorder"]
    assert ev["wait_for_subscribers"] == ["sim/status:2", "sim/scene:3", "action:2"]  # the recorder counts too
    default = launch_plan("sim_eval")
    assert [n.name for n in default.nodes] == ["sim_bridge", "scene_graph", "vla_policy", "evaluator"]
    assert default.node("sim_bridge").parameters["render_images"] is False
    assert default.node("evaluator").parameters["wait_for_subscribers"] == ["sim/status:1", "sim/scene:2", "action:1"]


def test_hardware_parameter_file_documents_every_declared_parameter():
    text = (REPO_ROOT / "config/ros/hardware.yaml").read_text()
    file_params = yaml.safe_load(text)
    nodes = {n.name: n.executable for plan in all_plans("hardware") for n in plan.nodes}
    assert set(file_params) == set(nodes)
    for name, executable in nodes.items():
        assert set(file_params[name]["ros__parameters"]) == declared(executable), name
        for p in file_params[name]["ros__parameters"]:
            assert re.search(rf"^\s+{p}: .*#", text, re.M), f"{name}.{p} has no comment"


def test_hardware_arguments_reach_the_nodes(tmp_path):
    real = launch_plan("hardware")
    assert [n.name for n in real.nodes] == ["so101_arm", "agentview_camera", "wrist_camera"]
    assert real.main == "so101_arm" and real.node("so101_arm").remappings == ()
    assert real.node("wrist_camera").parameters == {"config": "so101", "camera": "wrist"}
    teleop = launch_plan("hardware", {"teleop": "leader", "wrist": "cam2", "record": "ds", "task": "put it there",
                                      "episodes": "3", "auto_start": "true"})
    assert [n.name for n in teleop.nodes] == ["so101_arm", "agentview_camera", "wrist_camera", "so101_leader",
                                              "dataset_recorder"]
    goals = (("joint_commands", "leader/joint_states"),)
    assert teleop.node("so101_arm").remappings == goals and teleop.node("dataset_recorder").remappings == goals
    rec = teleop.node("dataset_recorder").parameters
    assert rec["root"].endswith("/ds") and rec["episodes"] == 3 and rec["auto_start"] is True
    assert rec["cameras"] == ["agentview", "cam2"] and rec["task"] == "put it there"
    assert teleop.main == "dataset_recorder" and teleop.env == {}
    rig = tmp_path / "rig.yaml"
    sim = launch_plan("hardware", {"sim": "true", "teleop": "true", "task_id": "2", "seed": "7", "config": str(rig)})
    assert [n.name for n in sim.nodes] == ["so101_twin", "so101_leader"] and sim.main == "so101_twin"
    assert sim.node("so101_twin").parameters == {"config": str(rig), "task_id": 2, "seed": 7,
                                                 "cameras": ["agentview", "wrist"]}
    assert sim.node("so101_twin").remappings == goals and sim.env == {"MUJOCO_GL": "egl"}
    assert launch_plan("hardware", {"sim": "true"}).node("so101_twin").parameters["config"] == "twin"


@pytest.mark.parametrize("args, message", [({"teleop": "keyboard"}, "false or leader"),
                                           ({"sim": "maybe"}, "true or false"),
                                           ({"record": "ds"}, "needs the dataset's task"),
                                           ({"sim": "true", "record": "ds", "episodes": "0"}, "episodes: must be"),
                                           ({"sim": "true", "task_id": "first"}, "expected an integer")])
def test_bad_hardware_arguments(args, message):
    with pytest.raises(ValueError, match=message):
        launch_plan("hardware", args)


def test_hardware_topic_table_names_known_nodes():
    from sgvla.launch.plan import HARDWARE_TOPICS, topic_table

    for t in HARDWARE_TOPICS:
        assert t.qos in QOS and set(t.publishers) | set(t.subscribers) <= set(EXECUTABLES), t.name
    table = topic_table(launch="hardware")
    assert "| `so101_twin` |" in table and "`{camera}/depth/image_raw`" in table


@pytest.mark.parametrize("args, message", [({"colour": "red"}, "unknown argument"),
                                           ({"stepping": "sometimes"}, "lockstep or free_running"),
                                           ({"render_images": "maybe"}, "true or false")])
def test_bad_arguments(args, message):
    with pytest.raises(ValueError, match=message):
        launch_plan("sim_eval", args)


def test_topic_table_names_known_nodes_and_qos():
    from sgvla_ros.qos import QOS as PROFILES

    assert set(QOS) <= set(PROFILES)
    known = set(EXECUTABLES)
    for t in TOPICS:
        assert t.qos in QOS or t.qos in ("service", "action")
        assert set(t.publishers) <= known and set(t.subscribers) <= known
    for name, args in ARGUMENTS.items():
        assert len({a.name for a in args}) == len(args), name


def test_launch_cli_rejects_bad_arguments(capsys):
    from sgvla.cli import main

    assert main(["launch", "sim_eval", "colour=red"]) == 2
    assert "unknown argument(s) colour" in capsys.readouterr().err
    assert main(["launch", "sim_eval", "colour:=red"]) == 2
    assert "write colour=red" in capsys.readouterr().err
    assert main(["launch", "sim_eval", "eval_overrides=tasks: [0]"]) == 2  # refused before any node starts
    assert "argument eval_overrides: override 'tasks:' is not of the form key=value" in capsys.readouterr().err
    assert main(["launch", "sim_eval", "eval_overrides=tasks=[0] 'policies=[{type: expert}]"]) == 2
    assert "No closing quotation" in capsys.readouterr().err
    assert main(["launch", "sim_eval", "stepping=[lockstep"]) == 2
    assert "stepping" in capsys.readouterr().err


def test_launch_arguments_are_name_value_items_of_text():
    """A value is the text after the first '=' as the shell hands it over; eval_overrides carries `sgvla eval`'s items,
    single-quoted where they hold spaces (the documented form), and they reach the evaluator as written."""
    from sgvla.cli.launch import launch_arguments
    from sgvla.core.config import parse_line

    args = launch_arguments(["sim=true", "episodes=3", "episode_time_s=0.5", "task=put it there", "config=",
                             "eval_overrides=tasks=[0] 'policies=[{type: expert}]' episodes=1"])
    assert args == {"sim": "true", "episodes": "3", "episode_time_s": "0.5", "task": "put it there", "config": "",
                    "eval_overrides": "tasks=[0] 'policies=[{type: expert}]' episodes=1"}
    plan = launch_plan("sim_eval", {"eval_overrides": args["eval_overrides"]})
    overrides = plan.node("evaluator").parameters["overrides"]
    assert parse_line(overrides) == {"tasks": [0], "policies": [{"type": "expert"}], "episodes": 1}
    assert launch_plan("hardware", launch_arguments(["sim=True", "record=ds", "episodes=2"])).node(
        "dataset_recorder").parameters["episodes"] == 2


def test_dry_run_and_table_print_without_starting(capsys):
    from sgvla.cli import main
    from sgvla.launch.plan import topic_table

    assert main(["launch", "sim_eval", "--dry-run", "stepping=free_running"]) == 0
    out = capsys.readouterr().out
    assert "sim_bridge: sim_bridge (sgvla_ros.sim_bridge) {'lockstep': False" in out and "evaluator:" in out
    assert main(["launch", "hardware", "--table"]) == 0
    assert capsys.readouterr().out == topic_table(launch="hardware") + "\n"


def _started(out: str) -> dict[str, int]:
    """Node -> pid, as the launcher's first line and the indented lines under it list every process it started."""
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("sgvla launch ") and "nodes on" in line)
    listed = [lines[first], *takewhile(lambda line: line.startswith("  "), lines[first + 1:])]
    return {name: int(pid) for name, pid in re.findall(r"(\w+) \[(\d+)\]", " ".join(listed))}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = open(f"/proc/{pid}/stat").read().split()[2] if os.path.exists(f"/proc/{pid}/stat") else "X"
    return status != "Z"


def test_launch_returns_the_evaluators_code_and_leaves_no_process(tmp_path, ros_domain_id):
    params = REPO_ROOT / "config/ros/sim_eval.yaml"
    plan = Plan("t", {}, params, (
        NodeSpec("graph_recorder", "graph_recorder", {"output": str(tmp_path / "g.jsonl")}),
        NodeSpec("evaluator", "evaluator", {"config": str(tmp_path / "missing.yaml")}),
    ), {}, main="evaluator")
    proc = launch_in_child(plan, ros_domain_id)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 2, out  # the evaluator's exit code for a bad plan
    assert "config file not found" in out
    kids = _started(out)
    assert set(kids) == {"graph_recorder", "evaluator"} and not any(_alive(k) for k in kids.values()), out


def test_a_node_dying_early_stops_the_launch(tmp_path, ros_domain_id):
    params = REPO_ROOT / "config/ros/sim_eval.yaml"
    config = tmp_path / "plan.yaml"
    config.write_text(yaml.safe_dump({"policies": [{"type": "expert"}], "tasks": [0], "episodes": 1}))
    plan = Plan("t", {}, params, (
        NodeSpec("graph_publisher", "graph_publisher", {"input": str(tmp_path / "missing.jsonl")}),
        NodeSpec("evaluator", "evaluator", {"config": str(config), "output_dir": str(tmp_path / "out"),
                                            "wait_for_nodes": ["graph_publisher"]}),
    ), {}, main="evaluator")
    proc = launch_in_child(plan, ros_domain_id)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 3, out
    assert re.search(r"graph_publisher exited first \(exit 1\): cannot start: FileNotFoundError: graph_publisher: "
                     r"input file not found: '.*missing.jsonl'; stopping the launch", out), out
    assert not any(_alive(k) for k in _started(out).values()), out


def test_so101_eval_plans_the_arm_or_the_twin_and_documents_its_parameters():
    arm = launch_plan("so101_eval", {"config": "rig.yaml", "cameras": "false", "eval_overrides": "tasks=[0]"})
    assert [n.name for n in arm.nodes] == ["so101_arm", "arm_policy", "evaluator"] and arm.main == "evaluator"
    assert arm.node("so101_arm").parameters["config"] == arm.node("arm_policy").parameters["config"]
    assert arm.node("arm_policy").parameters["config"].endswith("/rig.yaml")
    ev = arm.node("evaluator").parameters
    assert ev["config"].endswith("config/eval/so101_hardware.yaml") and ev["overrides"] == "tasks=[0]"
    assert ev["wait_for_nodes"] == ["so101_arm", "arm_policy"]
    assert ev["wait_for_subscribers"] == ["joint_states:1", "joint_commands:1"]
    assert ev["episode_timeout_s"] == 12 * 3600.0  # the operator sets the pace
    # arm_policy saves the rollouts into the run folder the evaluator writes (the plan's, absolute), with the cameras
    # the launch starts (none here)
    run = Path("outputs/eval/so101_hardware").absolute()
    assert ev["output_dir"] == str(run)
    assert arm.node("arm_policy").parameters["rollouts"] == str(run / "rollouts")
    assert arm.node("arm_policy").parameters["cameras"] == [""]
    out = launch_plan("so101_eval", {"eval_overrides": "output_dir=~/runs/a 'tasks=[0]'", "wrist": "gripper_cam"})
    assert out.node("arm_policy").parameters["rollouts"] == str(Path("~/runs/a/rollouts").expanduser())
    assert out.node("arm_policy").parameters["cameras"] == ["agentview", "gripper_cam"]
    assert launch_plan("so101_eval", {"output_dir": "x"}).node("evaluator").parameters["output_dir"] == str(
        Path("x").absolute())
    twin = launch_plan("so101_eval", {"sim": "true"})
    assert [n.name for n in twin.nodes] == [n.name for n in launch_plan("sim_eval").nodes]  # sim_eval's graph
    assert twin.node("evaluator").parameters["config"].endswith("config/eval/so101_twin.yaml")
    text = (REPO_ROOT / "config/ros/so101_eval.yaml").read_text()
    file_params = yaml.safe_load(text)
    nodes = {n.name: n.executable for plan in all_plans("so101_eval") if not plan.arguments["sim"] == "true"
             for n in plan.nodes}
    assert set(file_params) == set(nodes)
    for name, executable in nodes.items():
        assert set(file_params[name]["ros__parameters"]) == declared(executable), name
        for p in file_params[name]["ros__parameters"]:
            assert re.search(rf"^\s+{p}: .*#", text, re.M), f"{name}.{p} has no comment"


@pytest.mark.parametrize("args, message", [
    ({"sim": "true", "eval_config": "config/eval/so101_hardware.yaml"}, "is a so101_hardware plan.*runs so101_twin"),
    ({"eval_config": "config/eval/so101_twin.yaml"}, "is a so101_twin plan.*runs so101_hardware"),
    ({"sim": "true", "perception": "true"}, "argument perception: .*for the arm"),
    ({"eval_config": "config/eval/default.yaml"}, "is a libero_spatial plan"),
    ({"cameras": "some"}, "true or false")])
def test_bad_so101_eval_arguments(args, message):
    with pytest.raises(ValueError, match=message):
        launch_plan("so101_eval", args)


def test_so101_eval_topic_table_names_known_nodes():
    from sgvla.launch.plan import SO101_EVAL_TOPICS, topic_table

    for t in SO101_EVAL_TOPICS:
        assert (t.qos in QOS or t.qos == "action") and set(t.publishers) | set(t.subscribers) <= set(EXECUTABLES)
    table = topic_table(launch="so101_eval")
    assert "| `arm_policy` |" in table and "`eval/verdict`" in table and "`eval/confirm`" in table


def test_so101_eval_sim_takes_a_fiducial_plan_and_leaves_images_off_topics():
    """Perception on the twin is the plan's (suite.perception, graph_source fiducial): sim_eval's nodes run it, and
    render_images=false keeps the camera frames the backend perceives from off the topics even when recording."""
    plan = launch_plan("so101_eval", {"sim": "true", "eval_config": "config/eval/so101_twin_fiducial.yaml",
                                      "render_images": "false", "record": "/tmp/never_written_bag"})
    assert plan.node("sim_bridge").parameters["render_images"] is False
    assert plan.node("evaluator").parameters["config"].endswith("config/eval/so101_twin_fiducial.yaml")
    assert launch_plan("so101_eval", {"sim": "true", "record": "/tmp/never_written_bag"}).node(
        "sim_bridge").parameters["render_images"] is True


@pytest.mark.parametrize(("launch", "args"), [("sim_eval", {"eval_config": "config/eval/so101_twin.yaml"}),
                                               ("so101_eval", {"sim": "true"})])
def test_the_plans_suite_sets_what_the_nodes_see(launch, args):
    """A twin plan's nodes make the twin's camera topics, name objects in its ontology, and a learned policy reads
    both its cameras (not LIBERO's, the parameter file's defaults)."""
    plan = launch_plan(launch, args)
    assert plan.node("vla_policy").parameters["cameras"] == ["agentview", "wrist"]
    assert plan.node("sim_bridge").parameters["cameras"] == ["agentview", "wrist"]
    assert plan.node("scene_graph").parameters["ontology"] == "so101_tabletop"
    assert plan.node("scene_graph").parameters["cameras"] == ["agentview", "wrist"]


def test_a_process_joining_the_domain_as_the_launch_starts_stops_it(tmp_path, ros_domain_id):
    """The domain is checked before the launch and again once its nodes run: a participant that appeared in between
    (here a process bound to one of the domain's participant ports) stops the launch, named; the launch's own nodes
    never count."""
    import socket
    import subprocess
    import sys

    from sgvla.launch.ros_domain import participant_ports
    from sgvla.launch.run import run_processes

    port = participant_ports(ros_domain_id, 100)[0]
    other = subprocess.Popen([sys.executable, "-c", "import socket, time\n"
                              f"s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('127.0.0.1', {port}))\n"
                              "print('bound', flush=True); time.sleep(120)"], stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline() == "bound\n"
        plan = Plan("t", {}, REPO_ROOT / "config/ros/sim_eval.yaml", (
            NodeSpec("graph_recorder", "graph_recorder", {"output": str(tmp_path / "g.jsonl")}),), {},
            main="graph_recorder")
        said = []
        outcome = run_processes(plan, ros_domain_id, log=said.append, recheck=True)
    finally:
        other.kill()
        other.wait()
    assert outcome.code == 2, said
    assert f"ROS domain {ros_domain_id} was joined by another process while the launch started: {other.pid} (" \
        in outcome.failed_first, said
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", port))  # the other process is gone and so are the launch's nodes
