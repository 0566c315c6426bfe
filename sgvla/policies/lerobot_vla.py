"""LeRobot policies (act, smolvla, pi0, pi05, ...) behind sgvla's `Policy` interface.

Loading and every control step follow LeRobot 0.6.1's own evaluation (`lerobot/scripts/lerobot_eval.py`)
so that a score here means what it means there: `make_policy(cfg, env_cfg=LIBERO)`,
`make_pre_post_processors` from the checkpoint with the eval's overrides, the LIBERO env processors, and
per step `preprocess_observation` -> `observation["task"] = [prompt]` -> env preprocessor ->
preprocessor -> `select_action` under `torch.inference_mode()` -> postprocessor -> env postprocessor.
The prompt (task string, possibly with a scene graph composed into it) goes exactly where the eval
puts the task description.

Language-conditioned policies truncate their prompt: pi0 and smolvla tokenize at most 48 tokens,
pi05 200. pi05 first rewrites it to ``Task: <prompt>, State: <bins>;\\nAction: `` with underscores and
newlines turned into spaces, so the graph reaches it as one line and a long graph pushes the state
out of the window. `prompt_budget` measures this with the policy's own tokenizer on
the text its tokenizer step actually receives, and `received` shows what reached the model.
"""

from __future__ import annotations

import logging
import os
import re
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from lerobot.configs import PreTrainedConfig
from lerobot.envs.configs import LiberoEnv
from lerobot.envs.factory import make_env_pre_post_processors
from lerobot.envs.utils import preprocess_observation
from lerobot.lerobot_types import TransitionKey
from lerobot.policies import make_policy, make_pre_post_processors
from lerobot.processor import PolicyProcessorPipeline, TokenizerProcessorStep
from lerobot.utils.constants import ACTION, OBS_LANGUAGE_ATTENTION_MASK, OBS_LANGUAGE_TOKENS, OBS_STATE

from sgvla.core.protocols import PromptBudget, StepInput
from sgvla.scene_graph.serialize import CONTEXT_HEADER

logger = logging.getLogger(__name__)

LIBERO_SUITE = "libero_spatial"

# Triplets as `format_prompt_context` writes them, one pattern per style.
_REFERENCE_LINE = re.compile(r"^\([^(),\n]+, [^(),\n]+, [^(),\n]+\)$", re.M)
_COMPACT_LINE = re.compile(r"^Scene graph \([^)\n]*\): (.*)$", re.M)
_JSON_TRIPLET = re.compile(r'\["[^"]*", "[^"]*", "[^"]*"\]')
_JSON_GRAPH = re.compile(r'"scene_graph": \[((?:' + _JSON_TRIPLET.pattern + r'(?:, )?)*)\]')


def libero_env_config(**kwargs: Any) -> LiberoEnv:
    """LeRobot's LIBERO env config on the LIBERO-Spatial suite (what `make_policy` reads features from)."""
    return LiberoEnv(task=LIBERO_SUITE, **kwargs)


def triplet_spans(prompt: str) -> list[tuple[int, int]]:
    """Character spans of the scene-graph triplets in `prompt`'s context block, in prompt order.

    Reads the three styles of `format_prompt_context` (reference lines ``(a, r, b)``, the compact
    ``Scene graph (view): a r b; c r d`` line, the json ``scene_graph`` list); bounding boxes and
    the ``(none)``/``none`` placeholders are not triplets.
    """
    start = prompt.find(CONTEXT_HEADER)
    if start < 0:
        return []
    spans = [m.span() for m in _REFERENCE_LINE.finditer(prompt, start)]
    for line in _COMPACT_LINE.finditer(prompt, start):
        if line.group(1) == "none":
            continue
        pos = line.start(1)
        for item in line.group(1).split("; "):
            spans.append((pos, pos + len(item)))
            pos += len(item) + 2
    for graph in _JSON_GRAPH.finditer(prompt, start):
        spans += [m.span() for m in _JSON_TRIPLET.finditer(prompt, graph.start(1), graph.end(1))]
    return sorted(spans)


@dataclass(frozen=True)
class ReceivedPrompt:
    """The prompt as it reached the model at the last step."""

    text: str  # what the tokenizer step received (after the processor's own rewriting, e.g. pi05's)
    kept: str  # the tokens the model attends to, decoded: `text` cut at the budget


def _batched(observation: dict[str, Any]) -> dict[str, Any]:
    """Add the batch dimension a one-env vector env adds to every array of a LIBERO observation."""
    return {k: _batched(v) if isinstance(v, dict) else np.asarray(v)[None] for k, v in observation.items()}


def _is_local(path: str) -> bool:
    """A path, not a hub id (`owner/name`): it exists, or it cannot be a hub id."""
    return Path(path).expanduser().exists() or path.startswith(("/", ".", "~")) or path.count("/") != 1


class LeRobotPolicy:
    """A LeRobot policy loaded from a hub id or a local directory, stepped as `lerobot_eval` steps it.

    `policy_type`, when given, must match the checkpoint's type (checked before loading weights).
    `max_prompt_tokens` overrides the tokenizer step's `max_length` (LeRobot's processor override
    mechanism). The default keeps the length the policy was trained with; raising it lets a long
    scene graph through but feeds the model longer prompts than it ever saw: an experiment, not a fix.

    ACT has no language input: it ignores the prompt, `prompt_budget` is None, and its std and sg
    runs must be identical (a useful sanity check of the evaluation).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        device: str = "cpu",
        max_prompt_tokens: int | None = None,
        name: str | None = None,
        env_cfg: LiberoEnv | None = None,
        policy_type: str | None = None,
    ) -> None:
        path = str(path)
        if _is_local(path) and not Path(path).expanduser().is_dir():
            raise FileNotFoundError(f"policy directory {path} does not exist (a hub id reads owner/name)")
        if max_prompt_tokens is not None and max_prompt_tokens < 1:
            raise ValueError(f"max_prompt_tokens must be positive, got {max_prompt_tokens}")
        if _is_local(path):
            path = str(Path(path).expanduser())
        self.path = path
        self.name = name or Path(path).name
        self.env_cfg = env_cfg or libero_env_config()

        # As lerobot_eval: the config with the device override, then policy, processors, env processors.
        cfg = PreTrainedConfig.from_pretrained(path, cli_overrides=[f"--device={device}"])
        if policy_type is not None and cfg.type != policy_type:
            raise ValueError(f"policy type {policy_type!r} given, but {path} holds a {cfg.type!r} policy")
        cfg.pretrained_path = Path(path)
        self.cfg = cfg
        self.policy = make_policy(cfg=cfg, env_cfg=self.env_cfg, rename_map={})
        self.policy.eval()
        overrides: dict[str, dict[str, Any]] = {
            "device_processor": {"device": str(self.policy.config.device)},
            "rename_observations_processor": {"rename_map": {}},
        }
        if max_prompt_tokens is not None:
            overrides["tokenizer_processor"] = {"max_length": max_prompt_tokens}
        try:
            self.preprocessor, self.postprocessor = make_pre_post_processors(
                policy_cfg=cfg, pretrained_path=cfg.pretrained_path, preprocessor_overrides=overrides
            )
        except KeyError as e:
            if max_prompt_tokens is None:
                raise
            raise ValueError(
                f"max_prompt_tokens given, but the {cfg.type} policy at {path} has no tokenizer step "
                "(it takes no language input)"
            ) from e
        self.env_preprocessor, self.env_postprocessor = make_env_pre_post_processors(
            env_cfg=self.env_cfg, policy_cfg=cfg
        )

        state = cfg.robot_state_feature
        self.meter = PromptMeter.of(self.preprocessor, torch.zeros(1, *state.shape) if state else None)
        if self.meter is not None:
            self.preprocessor.register_before_step_hook(self._capture_text)
            self.preprocessor.register_after_step_hook(self._capture_tokens)
        self._received_text: str | None = None
        self._received_ids: torch.Tensor | None = None
        self._warned = False

    # -- Policy interface -------------------------------------------------------------------

    def reset(self, prompt: str) -> None:
        """Start an episode: clear the action queue (all lerobot_eval does between episodes)."""
        self.policy.reset()
        self._received_text = self._received_ids = None

    def act(self, step: StepInput) -> np.ndarray:
        amp = torch.autocast(device_type=self.policy.config.device) if self.cfg.use_amp else nullcontext()
        with torch.no_grad(), amp:
            observation = preprocess_observation(_batched(step.observation))
            observation["task"] = [step.prompt]
            observation = self.env_preprocessor(observation)
            if self.meter is not None and OBS_STATE in observation:
                self.meter.state = observation[OBS_STATE]  # pi05 writes the state into its prompt
            observation = self.preprocessor(observation)
            with torch.inference_mode():
                action = self.policy.select_action(observation)
            action = self.postprocessor(action)
            action = self.env_postprocessor({ACTION: action})[ACTION]
        return action.to("cpu").numpy()[0]

    def prompt_budget(self, prompt: str) -> PromptBudget | None:
        """Tokens of `prompt` as the tokenizer step sees it, the budget, and triplets kept whole.

        None for policies without language input. Warns once per policy when a prompt is truncated.
        """
        if self.meter is None:
            return None
        budget = self.meter.budget(prompt)
        if budget.truncated and not self._warned:
            self._warned = True
            logger.warning(
                "%s truncates its prompt: %d tokens, budget %d; %d of %d scene-graph triplets survive "
                "(warned once per policy)", self.name, budget.tokens, budget.budget, budget.triplets_kept,
                budget.triplets_total,
            )
        return budget

    def decision(self) -> dict[str, Any]:
        """Nothing: a learned policy decides no more than its actions (its prompt budget is reported apart)."""
        return {}

    # -- what reached the model ---------------------------------------------------------------

    @property
    def received(self) -> ReceivedPrompt | None:
        """The prompt of the last step as the tokenizer step got it, and the part the model kept."""
        if self._received_text is None or self._received_ids is None:
            return None
        kept = self.meter.step.input_tokenizer.decode(self._received_ids, skip_special_tokens=True)
        return ReceivedPrompt(text=self._received_text, kept=kept)

    def _capture_text(self, index: int, transition: dict) -> None:
        if index == self.meter.index:
            self._received_text = transition[TransitionKey.COMPLEMENTARY_DATA][self.meter.step.task_key][0]

    def _capture_tokens(self, index: int, transition: dict) -> None:
        if index == self.meter.index:
            observation = transition[TransitionKey.OBSERVATION]
            mask = observation[OBS_LANGUAGE_ATTENTION_MASK][0].cpu()
            self._received_ids = observation[OBS_LANGUAGE_TOKENS][0].cpu()[mask]


class PromptMeter:
    """A policy's prompts as its tokenizer step sees them: token count, budget, triplets kept whole.

    The steps before the tokenizer may rewrite the prompt (smolvla and pi0 append a newline; pi05
    writes ``Task: <prompt>, State: <state bins>;\\nAction: ``), so prompts are run through them,
    with `state` (the last observed state, zeros before the first step) standing in for the observation.
    """

    def __init__(self, preprocessor: PolicyProcessorPipeline, index: int, state: torch.Tensor | None) -> None:
        self.preprocessor = preprocessor
        self.index = index
        self.step: TokenizerProcessorStep = preprocessor.steps[index]
        self.state = state

    @classmethod
    def of(cls, preprocessor: PolicyProcessorPipeline, state: torch.Tensor | None) -> PromptMeter | None:
        """The meter of a preprocessor; None when it has no tokenizer step (no language input)."""
        found = [i for i, step in enumerate(preprocessor.steps) if isinstance(step, TokenizerProcessorStep)]
        return cls(preprocessor, found[0], state) if found else None

    def tokenizer_input(self, prompt: str) -> str:
        """`prompt` as the tokenizer step receives it."""
        observation = {} if self.state is None else {OBS_STATE: self.state}
        transition = self.preprocessor.to_transition({**observation, "task": [prompt]})
        # Steps that cache what they see (pi05's relative-action step keeps the state) are refreshed
        # by the real preprocessor call of the next step before anything reads them back.
        for step in self.preprocessor.steps[: self.index]:
            transition = step(transition)
        return transition[TransitionKey.COMPLEMENTARY_DATA][self.step.task_key][0]

    def budget(self, prompt: str) -> PromptBudget:
        text = self.tokenizer_input(prompt)
        tokenizer = self.step.input_tokenizer
        tokens = len(tokenizer(text)["input_ids"])
        budget = self.step.max_length if self.step.truncation else None
        spans = triplet_spans(prompt)
        kept = len(spans)
        if budget is not None and tokens > budget:
            window = tokenizer(text, max_length=budget, truncation=True, return_offsets_mapping=True)
            cut = max(end for _, end in window["offset_mapping"])
            kept = sum(1 for _, end in spans if self._position_in(text, prompt, end) <= cut)
        return PromptBudget(tokens=tokens, budget=budget, triplets_total=len(spans), triplets_kept=kept)

    def _position_in(self, text: str, prompt: str, end: int) -> int:
        """Where `prompt[:end]` ends inside `text`, the tokenizer input of the whole prompt.

        The steps before the tokenizer rewrite the prompt character by character and wrap it, so
        the rewritten prefix, closed by a character no step touches, shares exactly that much with `text`.
        """
        return len(os.path.commonprefix([self.tokenizer_input(prompt[:end] + "\0"), text]))
