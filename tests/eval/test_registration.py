"""A context mode, a graph source and a suite are one class each plus their registration: registered here, named in
a plan, checked when the plan loads, and run through a real episode (the SO101 twin, in process); the launch of a
plan on a new suite gives its nodes the suite's cameras, ontology and modules."""

from dataclasses import dataclass
from typing import ClassVar

import pytest

import sgvla.plugins  # noqa: F401
from sgvla.core.config import ConfigError, from_mapping
from sgvla.core.context import ContextMode
from sgvla.core.graph_source import GraphSourceConfig, GroundTruthSource
from sgvla.eval.config import EvalConfig
from sgvla.eval.runner import Worker, plan
from sgvla.eval.suite import SuiteConfig
from sgvla.launch.plan import launch_plan
from sgvla.scene_graph import Graph, ViewGraph
from sgvla.so101.twin.suite import So101TwinSuite

pytestmark = pytest.mark.sim


@dataclass
class VisibleObjects(ContextMode):
    """The names of the objects the view sees, no relations."""

    uses_graph: ClassVar[bool] = True

    def block(self, view_graph, view, ontology, style):
        return f"Visible in {view}: {', '.join(sorted(view_graph.boxes))}", 0


class EveryoneLeftOf(GroundTruthSource):
    """The ground truth's objects and boxes, with one invented relation (a source a test can recognise)."""

    name = "everyone_left_of"

    def view_graph(self, view, observation, scene, task):
        truth = super().view_graph(view, observation, scene, task)
        first, *rest = sorted(truth.boxes)
        return ViewGraph(view, Graph.of([(o, "is_left_of", first) for o in rest]), truth.boxes)


@dataclass
class EveryoneLeftOfConfig(GraphSourceConfig):
    marker: str = "x"

    def make(self, backend, ontology, upright):
        return EveryoneLeftOf(backend)


@pytest.fixture
def registered():
    ContextMode.register("visible_objects")(VisibleObjects)
    GraphSourceConfig.register("everyone_left_of")(EveryoneLeftOfConfig)
    yield
    ContextMode.unregister("visible_objects")
    GraphSourceConfig.unregister("everyone_left_of")


def plan_of(tmp_path, **changes) -> EvalConfig:
    data = {"suite": {"type": "so101_twin", "image_size": 64}, "policies": [{"type": "expert"}], "tasks": [0],
            "perturbations": "none", "modes": ["visible_objects", "scene_graph_full"], "episodes": 1, "max_steps": 3,
            "graph_source": {"type": "everyone_left_of", "marker": "y"}, "output_dir": str(tmp_path)}
    return from_mapping(EvalConfig, {**data, **changes})


def test_a_registered_mode_and_source_run_an_episode(registered, tmp_path):
    cfg = plan_of(tmp_path)
    worker = Worker(cfg)
    try:
        visible, full = (worker.run(key) for key in plan(cfg))
    finally:
        worker.close_backend()
    assert visible["mode"] == "visible_objects" and visible["steps"] == 3 and visible["graph_source"] == "everyone_left_of"
    assert "\nVisible in agentview: " in visible["prompt"] and "black_bowl" in visible["prompt"]
    assert full["triplets_in_prompt"] > 0 and "is_left_of" in full["prompt"] and "is_right_of" not in full["prompt"]


def test_unregistered_names_fail_when_the_plan_loads(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown context mode 'visible_objects'; choose from \["):
        plan_of(tmp_path, graph_source="ground_truth")
    with pytest.raises(ConfigError,
                       match=r"unknown graph source 'everyone_left_of'; choose from \['fiducial', 'ground_truth', "):
        plan_of(tmp_path, modes=["standard"])


def test_options_of_a_registered_choice_are_checked(registered, tmp_path):
    with pytest.raises(ConfigError, match=r"graph_source\(everyone_left_of\): unknown key\(s\) colour; valid keys: "
                                          "marker"):
        plan_of(tmp_path, graph_source={"type": "everyone_left_of", "colour": "red"})


@dataclass
class TwinTopCamera(So101TwinSuite):
    """A new simulated suite as a user adds one: a class and its registration. Two of the twin's tasks, its agent
    view only, no perturbation set of its own."""

    tasks: ClassVar[tuple[int, ...]] = (0, 1)
    views: ClassVar[tuple[str, ...]] = ("agentview",)


@pytest.fixture
def new_suite():
    SuiteConfig.register("twin_top_camera")(TwinTopCamera)
    yield
    SuiteConfig.unregister("twin_top_camera")


def test_a_new_suite_is_one_class_the_plan_and_the_launch_follow(new_suite, tmp_path):
    """Nothing else names it: a plan that names only the suite gets its tasks, perturbation set and view; an episode
    runs; the launch gives the node graph its cameras, ontology and modules."""
    cfg = from_mapping(EvalConfig, {"suite": {"type": "twin_top_camera", "image_size": 64}, "policies": ["expert"],
                                    "modes": ["scene_graph"], "episodes": 1, "max_steps": 3,
                                    "output_dir": str(tmp_path)})
    assert (cfg.tasks, cfg.perturbations, cfg.view) == ([0, 1], "none", "agentview")
    worker = Worker(cfg)
    try:
        record = worker.run(plan(cfg)[0])
    finally:
        worker.close_backend()
    assert record["steps"] == 3 and "View: agentview" in record["prompt"] and record["triplets_in_prompt"] > 0
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text("suite: {type: twin_top_camera}\npolicies: [expert]\n")
    nodes = launch_plan("sim_eval", {"eval_config": str(plan_file)})
    assert nodes.node("sim_bridge").parameters["cameras"] == ["agentview"]
    assert nodes.node("vla_policy").parameters["cameras"] == ["agentview"]
    assert nodes.node("scene_graph").parameters["ontology"] == "so101_tabletop"
    assert nodes.node("sim_bridge").parameters["preload"] == ["sgvla.so101.twin.backend"]


def test_an_option_of_a_choice_that_takes_none_says_so(tmp_path):
    with pytest.raises(ConfigError, match=r"graph_source\(ground_truth\): unknown key\(s\) rate_hz; it takes no "
                                          r"options$"):
        plan_of(tmp_path, graph_source={"type": "ground_truth", "rate_hz": 2}, modes=["standard"])
