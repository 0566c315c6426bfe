"""LeRobot policies (act, smolvla, pi0, pi05, ...) behind sgvla's `Policy` interface.

Loading and every control step follow LeRobot 0.6.1's own evaluation (`lerobot/scripts/lerobot_eval.py`)
so that a score here means what it means there: `make_policy(cfg, env_cfg=LIBERO)`,
`make_pre_post_processors` from the checkpoint with the eval's overrides, the LIBERO env processors, and
per step `preprocess_observation` -> `observation["task"] = [prompt]` -> env preprocessor ->
preprocessor -> `select_action` under `torch.inference_mode()` -> postprocessor -> env postprocessor.
The prompt (task string, possibly with a scene graph composed into it) goes exactly where the eval
puts the task description. `select_action`'s action queue is kept per episode (a session), so one model
serves many episodes: the sessions whose chunk ran out share one `predict_action_chunk` forward pass (what
`select_action` calls), each drawing its flow-matching noise from a generator seeded by its episode.

Language-conditioned policies truncate their prompt: pi0 and smolvla tokenize at most 48 tokens,
pi05 200. pi05 first rewrites it to ``Task: <prompt>, State: <bins>;\\nAction: `` with underscores and
newlines turned into spaces, so the graph reaches it as one line and a long graph pushes the state
out of the window. `prompt_budget` measures this with the policy's own tokenizer on
the text its tokenizer step actually receives, and `received` shows what reached the model.
"""

from __future__ import annotations

import logging
import os
from contextlib import nullcontext
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from lerobot.envs.configs import LiberoEnv
from lerobot.envs.factory import make_env_pre_post_processors
from lerobot.envs.utils import preprocess_observation
from lerobot.lerobot_types import TransitionKey
from lerobot.policies import make_policy, make_pre_post_processors
from lerobot.processor import PolicyProcessorPipeline, TokenizerProcessorStep
from lerobot.utils.constants import ACTION, OBS_LANGUAGE_ATTENTION_MASK, OBS_LANGUAGE_TOKENS, OBS_STATE

from sgvla.core.protocols import PolicyGaveUp, PromptBudget, StepInput
from sgvla.policies.checkpoint import (checkpoint_config, checkpoint_path, lerobot_prints, processor_overrides,
                                      use_threads)
from sgvla.policies.weights import checked_config
from sgvla.scene_graph.serialize import triplet_spans

logger = logging.getLogger(__name__)

LIBERO_SUITE = "libero_spatial"


def libero_env_config(**kwargs: Any) -> LiberoEnv:
    """LeRobot's LIBERO env config on the LIBERO-Spatial suite (what `make_policy` reads features from)."""
    return LiberoEnv(task=LIBERO_SUITE, **kwargs)


@dataclass(frozen=True)
class ReceivedPrompt:
    """The prompt as it reached the model at the last step."""

    text: str  # what the tokenizer step received (after the processor's own rewriting, e.g. pi05's)
    kept: str  # the tokens the model attends to, decoded: `text` cut at the budget


def _batched(observation: dict[str, Any]) -> dict[str, Any]:
    """Add the batch dimension a one-env vector env adds to every array of a LIBERO observation."""
    return {k: _batched(v) if isinstance(v, dict) else np.asarray(v)[None] for k, v in observation.items()}


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
        random_weights: bool = False,
        weights_sha256: str | None = None,
        threads: int = 2,
    ) -> None:
        path = checkpoint_path(path)
        self.threads = threads
        if max_prompt_tokens is not None and max_prompt_tokens < 1:
            raise ValueError(f"max_prompt_tokens must be positive, got {max_prompt_tokens}")
        self.path = path
        self.name = name or Path(path).name
        self.env_cfg = env_cfg or libero_env_config()

        # As lerobot_eval: the config with the device override, then policy, processors, env processors; the weights
        # checked first (LeRobot may load a random model and only print why), or built at random on purpose.
        cfg, self.provenance = checked_config(path, device, policy_type, random_weights, weights_sha256)
        self.cfg = cfg
        # LeRobot's own build (float32, then its bfloat16 conversion of the PaliGemma part only): built in bfloat16
        # throughout, pi05's action_in_proj was bfloat16 where LeRobot keeps it float32, and every forward pass
        # failed ("mat1 and mat2 must have the same dtype"; test_pi_forward, the first time it ran).
        with lerobot_prints(self.name):  # LeRobot prints while it loads: kept off sgvla's stdout
            self.policy = make_policy(cfg=cfg, env_cfg=self.env_cfg, rename_map={})
        self.policy.eval()
        overrides, _ = processor_overrides(self.policy.config.device)
        if max_prompt_tokens is not None:
            overrides["tokenizer_processor"] = {"max_length": max_prompt_tokens}
        try:
            with lerobot_prints(self.name):
                self.preprocessor, self.postprocessor = make_pre_post_processors(
                    policy_cfg=cfg, pretrained_path=Path(path), preprocessor_overrides=overrides
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
        self._zero_state = torch.zeros(1, *state.shape) if state else None
        self.meter = PromptMeter.of(self.preprocessor, self._zero_state)
        if self.meter is not None:
            self.preprocessor.register_before_step_hook(self._capture_text)
            self.preprocessor.register_after_step_hook(self._capture_tokens)
        # Steps that keep what they last saw (pi05's relative actions keep the state for the postprocessor's way
        # back): restored per session before its action is postprocessed, as if it had been stepped alone.
        self._stateful = [step for step in self.preprocessor.steps if hasattr(step, "_last_state")]
        # Flow-matching policies (smolvla, pi0, pi05) start each chunk from noise: drawn from the session's own
        # generator, seeded by the episode, so an episode's actions do not depend on what else shares the batch.
        self._noise_shape = noise_shape(self.policy)
        self._capturing: _Session | None = None
        tokenizer = self.meter.step.input_tokenizer if self.meter is not None else None
        self._padding = (tokenizer.pad_token_id or 0, self.meter.step.padding_side) if tokenizer is not None else (0,
                                                                                                                "right")
        self._session = self.open_session()
        self._warned = False

    # -- Policy interface: one episode at a time, on a session of its own -------------------------

    def reset(self, prompt: str, seed: int | None = None) -> None:
        """Start an episode: a fresh action queue (all lerobot_eval does between episodes), noise seeded by `seed`."""
        self._session = self.open_session()
        self.reset_session(self._session, prompt, seed)

    def act(self, step: StepInput) -> np.ndarray:
        action = self.act_batch([self._session], [step])[0]
        assert isinstance(action, np.ndarray)  # a LeRobot policy never gives up
        return action

    def prompt_budget(self, prompt: str) -> PromptBudget | None:
        """Tokens of `prompt` as the tokenizer step sees it, the budget, and triplets kept whole.

        None for policies without language input. Warns once per policy when a prompt is truncated.
        """
        return self.session_budget(self._session, prompt)

    def decision(self) -> dict[str, Any]:
        """Nothing: a learned policy decides no more than its actions (its prompt budget is reported apart)."""
        return {}

    # -- BatchPolicy interface: many episodes, one model ------------------------------------------

    def open_session(self) -> _Session:
        return _Session()

    def reset_session(self, session: _Session, prompt: str, seed: int | None) -> None:
        session.queue.clear()
        session.state = session.received_text = session.received_ids = None
        session.generator = seeded_generator(seed, self.policy.config.device)
        coeff = getattr(self.cfg, "temporal_ensemble_coeff", None)
        if coeff is not None:  # ACT's temporal ensembling: a chunk every step, averaged per episode
            from lerobot.policies.act.modeling_act import ACTTemporalEnsembler

            session.ensembler = ACTTemporalEnsembler(coeff, self.cfg.chunk_size)

    def act_batch(self, sessions: Sequence[_Session], steps: Sequence[StepInput]) -> list[np.ndarray | PolicyGaveUp]:
        """One step of each session, as `lerobot_eval` steps one env: every observation through the processors,
        and one forward pass (`predict_action_chunk`) for the sessions whose chunk has run out; each session then
        plays the next action of its own chunk (`select_action`'s queue, kept per session)."""
        use_threads(self.threads)
        amp = torch.autocast(device_type=self.policy.config.device) if self.cfg.use_amp else nullcontext()
        with torch.no_grad(), amp:
            prepared = [self._prepare(session, step) for session, step in zip(sessions, steps, strict=True)]
            need = [i for i, session in enumerate(sessions) if session.ensembler is not None or not session.queue]
            if need:
                batch = stack_batches([prepared[i][0] for i in need], *self._padding)
                extra = {}
                if self._noise_shape is not None:
                    extra["noise"] = episode_noise(self._noise_shape, [sessions[i].generator for i in need],
                                                   self.policy.config.device)
                with torch.inference_mode():
                    chunks = self.policy.predict_action_chunk(batch, **extra)
                for row, i in enumerate(need):
                    sessions[i].adopt(chunks[row:row + 1], self.cfg.n_action_steps)
            actions = []
            for session, (_, kept) in zip(sessions, prepared, strict=True):
                for step, state in zip(self._stateful, kept, strict=True):
                    step._last_state = state
                action = self.postprocessor(session.queue.popleft())
                action = self.env_postprocessor({ACTION: action})[ACTION]
                actions.append(action.to("cpu").numpy()[0])
        return actions

    def _prepare(self, session: _Session, step: StepInput) -> tuple[dict[str, Any], list]:
        """The observation through the env and policy preprocessors (batch of one), and the stateful steps' state."""
        observation = preprocess_observation(_batched(step.observation))
        observation["task"] = [step.prompt]
        observation = self.env_preprocessor(observation)
        if OBS_STATE in observation:
            session.state = observation[OBS_STATE]  # pi05 writes the state into its prompt
        self._capturing = session
        try:
            observation = self.preprocessor(observation)
        finally:
            self._capturing = None
        return observation, [step._last_state for step in self._stateful]

    def session_budget(self, session: _Session, prompt: str) -> PromptBudget | None:
        if self.meter is None:
            return None
        self.meter.state = session.state if session.state is not None else self._zero_state
        budget = self.meter.budget(prompt)
        if budget.truncated and not self._warned:
            self._warned = True
            logger.warning(
                "%s truncates its prompt: %d tokens, budget %d; %d of %d scene-graph triplets survive "
                "(warned once per policy)", self.name, budget.tokens, budget.budget, budget.triplets_kept,
                budget.triplets_total,
            )
        return budget

    def session_decision(self, session: _Session) -> dict[str, Any]:
        return {}

    def close_session(self, session: _Session) -> None:
        session.queue.clear()

    def close(self) -> None:
        """Nothing held beyond memory: the model goes with the last reference to this object."""

    # -- what reached the model ---------------------------------------------------------------

    @property
    def received(self) -> ReceivedPrompt | None:
        """The prompt of the last step as the tokenizer step got it, and the part the model kept."""
        session = self._session
        if session.received_text is None or session.received_ids is None:
            return None
        kept = self.meter.step.input_tokenizer.decode(session.received_ids, skip_special_tokens=True)
        return ReceivedPrompt(text=session.received_text, kept=kept)

    def _capture_text(self, index: int, transition: dict) -> None:
        if index == self.meter.index and self._capturing is not None:
            self._capturing.received_text = transition[TransitionKey.COMPLEMENTARY_DATA][self.meter.step.task_key][0]

    def _capture_tokens(self, index: int, transition: dict) -> None:
        if index == self.meter.index and self._capturing is not None:
            observation = transition[TransitionKey.OBSERVATION]
            mask = observation[OBS_LANGUAGE_ATTENTION_MASK][0].cpu()
            self._capturing.received_ids = observation[OBS_LANGUAGE_TOKENS][0].cpu()[mask]


@dataclass
class _Session:
    """One episode's state in a `LeRobotPolicy`: its action queue, noise stream and what reached the model."""

    queue: deque = field(default_factory=deque)  # actions (1, action_dim) still to play, before postprocessing
    generator: torch.Generator | None = None
    ensembler: Any = None  # ACT's temporal ensembler, when the checkpoint uses one
    state: torch.Tensor | None = None  # the last observed state (what pi05 writes into its prompt)
    received_text: str | None = None
    received_ids: torch.Tensor | None = None

    def adopt(self, chunk: torch.Tensor, n_action_steps: int) -> None:
        """A new chunk (1, chunk_size, action_dim): its first `n_action_steps` actions are played, or, with temporal
        ensembling, this step's ensembled action."""
        if self.ensembler is not None:
            self.queue.append(self.ensembler.update(chunk))
        else:
            self.queue.extend(chunk[:, :n_action_steps].transpose(0, 1))


def noise_shape(policy: Any) -> tuple[int, int, int] | None:
    """The shape of one episode's noise for a chunk of a flow-matching policy (smolvla, pi0, pi05); None for others."""
    if not hasattr(getattr(policy, "model", None), "sample_noise"):
        return None
    return (1, policy.config.chunk_size, policy.config.max_action_dim)


def seeded_generator(seed: int | None, device: str | torch.device = "cpu") -> torch.Generator:
    """An episode's noise stream on the policy's device: seeded by its seed, or at random without one."""
    generator = torch.Generator(device=device)
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(seed)
    return generator


def episode_noise(shape: tuple[int, ...], generators: Sequence[torch.Generator | None],
                  device: str | torch.device) -> torch.Tensor:
    """The noise of one chunk for each episode of a batch, stacked: each drawn from its episode's generator (None:
    torch's global one) on the policy's device, standard normal float32, as LeRobot's `sample_noise` draws it.

    Why this call on this device: after ``torch.manual_seed(seed)``, LeRobot's ``torch.normal(0, 1, size)`` on the
    global generator is ``torch.randn(size, generator=<seeded by seed>)`` on the same device (the same normal_
    kernel from the same state; bit for bit on the CPU, tests/lerobot_plugins/test_env_noise.py), so `lerobot-eval`
    with ``--env.seed_noise=true`` (`lerobot_env_sgvla`) draws the noise `sgvla eval` draws for the same episode.
    Noise drawn on the CPU and moved to CUDA could not be LeRobot's, which CUDA's own generator draws there."""
    return torch.cat([torch.randn(shape, generator=g, device=device, dtype=torch.float32) for g in generators])


def stack_batches(observations: list[dict[str, Any]], pad_token_id: int = 0, padding_side: str = "right"
                  ) -> dict[str, Any]:
    """Preprocessed observations (batches of one) as one batch: tensors concatenated, lists joined. Prompts that a
    tokenizer padded to their own length (`padding="longest"`, as SmolVLA's) are padded to the longest of the batch
    with `pad_token_id` and a false attention mask, as a batch tokenized together would be."""
    first = observations[0]
    if len(observations) == 1:
        return first
    batch: dict[str, Any] = {}
    for key, value in first.items():
        values = [o[key] for o in observations]
        if isinstance(value, torch.Tensor):
            if key in (OBS_LANGUAGE_TOKENS, OBS_LANGUAGE_ATTENTION_MASK):
                values = _padded(values, pad_token_id if key == OBS_LANGUAGE_TOKENS else 0, padding_side)
            batch[key] = torch.cat(values)
        elif isinstance(value, list):
            batch[key] = [item for v in values for item in v]
        else:
            batch[key] = value
    return batch


def _padded(tensors: list[torch.Tensor], value: int, side: str) -> list[torch.Tensor]:
    longest = max(t.shape[1] for t in tensors)
    out = []
    for t in tensors:
        pad = (0, longest - t.shape[1]) if side == "right" else (longest - t.shape[1], 0)
        out.append(torch.nn.functional.pad(t, pad, value=value) if pad != (0, 0) else t)
    return out


def checkpoint_prompt_meter(path: str | Path, device: str = "cpu", max_prompt_tokens: int | None = None
                            ) -> PromptMeter | None:
    """The prompt meter of a checkpoint from its config and preprocessor alone, without loading its weights: how a
    loop that steps the policy elsewhere (LeRobot's own, in `lerobot_env_sgvla`) measures prompts as `LeRobotPolicy`
    does (before the first step: the state stands at zeros). None for a policy without language input."""
    path = checkpoint_path(path)
    cfg = checkpoint_config(path, device)
    overrides, _ = processor_overrides(device)
    if max_prompt_tokens is not None:
        overrides["tokenizer_processor"] = {"max_length": max_prompt_tokens}
    with lerobot_prints(Path(path).name):
        preprocessor, _ = make_pre_post_processors(policy_cfg=cfg, pretrained_path=path,
                                                   preprocessor_overrides=overrides)
    state = cfg.robot_state_feature
    return PromptMeter.of(preprocessor, torch.zeros(1, *state.shape) if state else None)


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
