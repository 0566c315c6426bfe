"""The operator's protocol of an episode on the physical arm, ROS-free (the `arm_policy` node runs it over topics).

Per episode: the arm returns to the suite's home pose at bounded speed (`home_goal`: the safety layer's
`safe_goal` with the suite's `home_step_deg` as the per-tick bound, so the goal never runs ahead of the arm); the
operator is shown the task and perturbation (`scene_card`; the context mode only when the plan is not `blind`),
sets the scene and confirms; the policy runs until the time limit or an operator stop; the operator's verdict
(`parse_verdict`: ``success|failure|invalid [note]``, on the eval/verdict topic or typed into the terminal of
`sgvla launch`: `parse_keyboard`) is the result. An invalid verdict is no result: the episode is
run again (the evaluator redoes it at once and logs the invalid attempt in infra_failures.jsonl with kind
``invalid``). Each record carries the verdict, its source, the operator's note, the home-pose error and the
phases' durations (`verdict_facts`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sgvla.core.episode import EpisodeKey
from sgvla.so101.hardware.safety import SafetyConfig, safe_goal

VERDICTS = ("success", "failure", "invalid")
CONFIRM = ("start", "stop")  # eval/confirm: the scene is set (start; empty text too), or end the running episode


class OperatorInputError(ValueError):
    """Operator text that is not a verdict or confirmation; the message says what is valid."""


@dataclass(frozen=True)
class Verdict:
    outcome: str  # success | failure | invalid
    note: str = ""
    source: str = "topic"  # topic | keyboard

    @property
    def success(self) -> bool:
        return self.outcome == "success"


def parse_verdict(text: str, source: str = "topic") -> Verdict:
    """``success|failure|invalid [note]`` (case-insensitive outcome; the rest of the line is the note)."""
    word, _, note = text.strip().partition(" ")
    outcome = word.lower()
    if outcome not in VERDICTS:
        raise OperatorInputError(f"verdict {text.strip()!r}: expected one of {'|'.join(VERDICTS)}, then an optional "
                                 "note (e.g. 'failure dropped the bowl')")
    return Verdict(outcome, note.strip(), source)


def parse_confirm(text: str) -> str:
    """``start`` (the scene is set; empty text too) or ``stop`` (end the running episode now)."""
    word = text.strip().lower() or "start"
    if word not in CONFIRM:
        raise OperatorInputError(f"confirm {text.strip()!r}: expected start (or nothing) when the scene is set, "
                                 "stop to end the running episode")
    return word


def parse_keyboard(text: str) -> tuple[str, str | Verdict]:
    """A line typed into the operator's terminal: Enter or ``start`` / ``stop`` confirm or stop, as on eval/confirm;
    anything else is a verdict, as on eval/verdict (its source: keyboard)."""
    if text.strip().lower() in ("", *CONFIRM):
        return "confirm", parse_confirm(text)
    return "verdict", parse_verdict(text, "keyboard")


def home_goal(home: Mapping[str, float], present: Mapping[str, float], safety: SafetyConfig,
              step_deg: float) -> dict[str, float]:
    """The next goal towards `home`: inside the joint limits, at most `step_deg` from where each joint is."""
    return safe_goal(home, present, safety, max_step=min(step_deg, safety.max_step))


def home_error(home: Mapping[str, float], present: Mapping[str, float]) -> float:
    """The largest distance of a joint from its home position (degrees; the gripper in %)."""
    return max(abs(present[j] - v) for j, v in home.items())


def scene_card(episode: int, key: EpisodeKey, prompt: str, perturbation: str, blind: bool) -> str:
    """What the operator reads before setting the scene (the context mode only when not blind)."""
    mode = "" if blind else f"; mode {key.mode}"
    return (f"episode {episode}: task {key.task_id}: {prompt!r}; perturbation {key.perturbation}: {perturbation}; "
            f"policy {key.policy}; seed {key.seed}{mode}")


def verdict_facts(verdict: Verdict, stopped_by: str, home_error_deg: float, timings: Mapping[str, float]
                  ) -> dict[str, Any]:
    """What the episode record adds about the protocol (the same episodes.jsonl, extra keys)."""
    return {"verdict": verdict.outcome, "verdict_source": verdict.source, "operator_note": verdict.note,
            "stopped_by": stopped_by, "home_error_deg": round(home_error_deg, 3),
            **{f"{phase}_s": round(seconds, 3) for phase, seconds in timings.items()}}


class NoGraph:
    """The graph source of a suite without perception: standard-mode episodes never ask it for a graph."""

    name = "none"

    def reset(self) -> None:
        pass

    def view_graph(self, view, observation, scene, task):
        raise ValueError("no graph source on this suite (standard mode only)")

    def stats(self) -> dict:
        return {}

    def close(self) -> None:
        pass
