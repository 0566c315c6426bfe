"""The prompt-grounded policy on perceived objects (issue 15.6, in process): the twin renders its cameras, fiducial
perception (`LivePerception`, as the fiducial_graphs node runs it: intrinsics of the stream, extrinsics from the
calibration files, the wrist camera by forward kinematics) gives the poses, and the policy grounds its target and
plans its grasp on the scene built from them, never the simulator's; with the perceived agent-view graph injected
(graph mode) too. It must choose the bowl it chooses on the privileged scene, with joint targets close to those."""

import numpy as np
import pytest

from sgvla.core.protocols import StepInput
from sgvla.core.state import Observation
from sgvla.policies.scripted import PromptGroundedPolicy
from sgvla.scene_graph import format_prompt_context, load_ontology
from sgvla.so101.hardware.calibration import load_camera_calibration
from sgvla.so101.perception.fiducials import load_marker_config
from sgvla.so101.perception.live import LivePerception, StreamImage
from sgvla.so101.twin.config import TARGET, load_twin_config
from sgvla.so101.twin.pick_place import PickPlaceParams, TwinPickPlace
from sgvla.so101.twin.twin import So101Twin

pytestmark = pytest.mark.sim

WIDTH, HEIGHT = 640, 480  # the rig's stream size (at 320x240 task 0's rest pose hides two objects' markers)


def _act(policy, prompt, scene, twin):
    info = {"goal": (TARGET, twin.layout.place), "table_center": np.array([*twin.config.table_center_xy, 0.0]),
            "pick_place": lambda target, place: TwinPickPlace(twin.model, twin.config, target, place)}
    policy.reset(prompt)
    action = policy.act(StepInput(Observation({}, {}, {}, prompt), prompt, scene, info))
    return action, policy.decision()


# Task 4 is left out: its second bowl stands behind the arm's base in the agent view and out of the wrist camera's
# at rest, so no marker of it is seen (README, the fiducial benchmark's missing objects).
@pytest.mark.parametrize("task_id", range(4))
def test_prompt_grounded_policy_grounds_on_perceived_objects(task_id):
    config, markers, ontology = load_twin_config(), load_marker_config(), load_ontology("so101_tabletop")
    twin = So101Twin(config, task_id)
    try:
        twin.reset(0)
        files = {"agentview": config.agentview_calibration, "wrist": config.wrist_calibration}
        params = PickPlaceParams()
        live = LivePerception(markers, {n: load_camera_calibration(f) for n, f in files.items()},
                              (params.open_angle + params.closed_angle) / 2)
        images = {}
        for name in files:
            live.set_intrinsics(name, twin.intrinsics(name, WIDTH, HEIGHT), np.zeros(5), WIDTH, HEIGHT)
            images[name] = StreamImage(twin.render(name, WIDTH, HEIGHT), twin.render_depth(name, WIDTH, HEIGHT))
        joints = twin.joint_positions()
        poses = live.update(0.0, images, joints)
        perceived = live.scene(poses, twin.task, joints)
        truth = twin.scene()
        assert set(perceived.objects) == set(truth.objects)
        for name in truth.objects:
            assert np.linalg.norm(perceived.position(name) - truth.position(name)) < 0.01, name
        assert np.linalg.norm(perceived.eef_pos - truth.eef_pos) < 0.005  # forward kinematics vs the simulator's site

        prompt = twin.layout.prompt
        graph = live.graphs(poses, twin.task)["agentview"]
        context = format_prompt_context(graph.graph, "agentview", ontology, subject_filter=None, style="reference",
                                        boxes=graph.boxes)
        for text in (prompt, f"{prompt}\n{context}"):
            policy = PromptGroundedPolicy(ontology)
            action, decision = _act(policy, text, perceived, twin)
            reference, expected = _act(PromptGroundedPolicy(ontology), text, truth, twin)
            assert decision["target"] == expected["target"] and decision["place"] == expected["place"]
            assert decision["grounding_source"] == expected["grounding_source"]
            assert action.shape == (6,) and np.all(np.isfinite(action))
            assert np.abs(action - reference).max() < 0.1  # radians: the first IK goal from perceived positions
    finally:
        twin.close()
