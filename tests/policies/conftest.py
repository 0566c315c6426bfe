"""Tiny random-weight LeRobot policies saved once per session, and LIBERO-shaped observations.

Nothing here reaches the Hugging Face hub: offline mode is on for this process, also when an earlier
test module imported huggingface_hub before this file ran.
"""

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import huggingface_hub.constants  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from gymnasium import spaces  # noqa: E402

from sgvla.scene_graph import Graph, compose_prompt, format_prompt_context, load_ontology  # noqa: E402

huggingface_hub.constants.HF_HUB_OFFLINE = True  # read at call time by every hub request

OBS_SIZE = 128
ONTOLOGY = load_ontology("libero_spatial")
TASK = "pick up the black bowl between the plate and the ramekin and place it on the plate"
RELATIONS = ("is_left_of", "is_right_of", "is_in_front_of", "is_behind")


def libero_observation_space(size: int = OBS_SIZE) -> spaces.Dict:
    """The observation space of `lerobot.envs.libero.LiberoEnv` (obs_type "pixels_agent_pos", default cameras)."""
    image = spaces.Box(0, 255, (size, size, 3), np.uint8)

    def state(*shape: int) -> spaces.Box:
        return spaces.Box(-np.inf, np.inf, shape, np.float64)

    return spaces.Dict({
        "pixels": spaces.Dict({"image": image, "image2": image}),
        "robot_state": spaces.Dict({
            "eef": spaces.Dict({"pos": state(3), "quat": state(4), "mat": state(3, 3)}),
            "gripper": spaces.Dict({"qpos": state(2), "qvel": state(2)}),
            "joints": spaces.Dict({"pos": state(7), "vel": state(7)}),
        }),
    })


@pytest.fixture
def libero_space() -> spaces.Dict:
    return libero_observation_space()


@pytest.fixture
def libero_observations(libero_space):
    """`n` unbatched observations as LeRobot's LIBERO env returns them (unit quaternions)."""

    def make(n: int, seed: int = 0) -> list[dict]:
        space = libero_space
        space.seed(seed)
        observations = []
        for _ in range(n):
            obs = space.sample()
            quat = obs["robot_state"]["eef"]["quat"]
            obs["robot_state"]["eef"]["quat"] = quat / np.linalg.norm(quat)
            observations.append(obs)
        return observations

    return make


def _full_graph() -> Graph:
    """Every ordered pair of LIBERO-Spatial objects with some relation: the densest graph a scene gives."""
    objects = ONTOLOGY.objects
    pairs = [(a, b) for a in objects for b in objects if a != b]
    return Graph.of([(a, RELATIONS[i % len(RELATIONS)], b) for i, (a, b) in enumerate(pairs)])


@pytest.fixture
def make_prompt():
    """The LIBERO task alone (graph=None), or with a "filtered" or "full" scene-graph context."""

    def make(graph: str | None = "filtered", style: str = "reference") -> str:
        if graph is None:
            return TASK
        context = format_prompt_context(_full_graph(), "agentview", ONTOLOGY, style=style,
                                        subject_filter=None if graph == "full" else ONTOLOGY.manipulated)
        return compose_prompt(TASK, context)

    return make


@pytest.fixture(scope="session")
def tiny_act_dir(tmp_path_factory):
    from sgvla.policies.tiny import build_tiny_act

    return build_tiny_act(tmp_path_factory.mktemp("tiny_act"))


@pytest.fixture(scope="session")
def tiny_smolvla_dir(tmp_path_factory):
    from sgvla.policies.tiny import build_tiny_smolvla

    return build_tiny_smolvla(tmp_path_factory.mktemp("tiny_smolvla"))


@pytest.fixture(scope="session")
def weightless_pi_dirs(tmp_path_factory) -> dict:
    """pi0 and pi05 checkpoints without weights (config, processors, local tokenizer): LeRobot 0.6.1 cannot build
    them tiny, so loading one makes a full-size random model; see `sgvla.policies.tiny`."""
    from sgvla.policies.tiny import build_weightless_pi0, build_weightless_pi05

    return {"pi0": build_weightless_pi0(tmp_path_factory.mktemp("pi0")),
            "pi05": build_weightless_pi05(tmp_path_factory.mktemp("pi05"))}
