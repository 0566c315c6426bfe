"""pi0 / pi05 forward passes on this machine: load time, time per action chunk, peak memory, and a batch of two
episodes against each alone.

    sgvla make-tiny-policy pi05 /tmp/pi05     # the smallest real pi05, random, saved with its weights (8.7 GiB)
    python benchmarks/bench_pi_forward.py /tmp/pi05 [--device cpu] [--chunks 1]

The checkpoint is loaded as `sgvla eval` loads it (`LeRobotPolicy`: weights checked, built in bfloat16). Two
episodes (seeds 0 and 1, LIBERO-shaped random observations, a prompt with the full scene graph) each play `--chunks`
chunks alone, then the same two episodes are stepped as one batch (what the policy server does): their actions must
agree within bfloat16 rounding. Printed: load seconds, seconds per chunk (alone: batch of one; batched: batch of
two), peak resident memory (VmHWM) and peak anonymous memory (RssAnon: the model and activations; the rest of the
peak is the weights file mapped while it loads), the prompt budget and what reached the model (pi05 writes the
state into its prompt).
"""

from __future__ import annotations

import argparse
import os
import threading
import time

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def memory_kib() -> dict[str, int]:
    """This process's resident memory now (kB): VmRSS, VmHWM (its peak), RssAnon, RssFile."""
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                fields[key] = int(value.split()[0])
    return fields


class PeakAnon:
    """The highest RssAnon seen, sampled every 50 ms (the kernel keeps no peak of it)."""

    def __init__(self) -> None:
        self.peak, self._stop = 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, memory_kib()["RssAnon"])

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return max(self.peak, memory_kib()["RssAnon"])


def observations(n: int, seed: int, size: int = 256) -> list[dict]:
    """`n` observations shaped as LeRobot's LIBERO env returns them (two cameras, eef pose, gripper, joints)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        quat = rng.normal(size=4)
        out.append({
            "pixels": {cam: rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for cam in ("image", "image2")},
            "robot_state": {
                "eef": {"pos": rng.normal(size=3), "quat": quat / np.linalg.norm(quat), "mat": np.eye(3)},
                "gripper": {"qpos": rng.normal(size=2), "qvel": rng.normal(size=2)},
                "joints": {"pos": rng.normal(size=7), "vel": rng.normal(size=7)},
            },
        })
    return out


def full_prompt() -> str:
    """The LIBERO-Spatial task with every ordered pair of its objects in the scene-graph context (the longest)."""
    from sgvla.scene_graph import Graph, compose_prompt, format_prompt_context, load_ontology

    ontology = load_ontology("libero_spatial")
    relations = ("is_left_of", "is_right_of", "is_in_front_of", "is_behind")
    pairs = [(a, b) for a in ontology.objects for b in ontology.objects if a != b]
    graph = Graph.of([(a, relations[i % 4], b) for i, (a, b) in enumerate(pairs)])
    task = "pick up the black bowl between the plate and the ramekin and place it on the plate"
    return compose_prompt(task, format_prompt_context(graph, "agentview", ontology, style="reference"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--chunks", type=int, default=1, help="chunks each episode plays")
    args = parser.parse_args()

    import torch

    from sgvla.core.protocols import StepInput
    from sgvla.policies.lerobot_vla import LeRobotPolicy

    peak = PeakAnon()
    start = time.perf_counter()
    policy = LeRobotPolicy(args.checkpoint, device=args.device)
    load_s = time.perf_counter() - start
    cfg = policy.cfg
    steps = args.chunks * cfg.n_action_steps
    prompt = full_prompt()
    episodes = [(seed, observations(steps, seed)) for seed in (0, 1)]
    print(f"{cfg.type}: {sum(p.numel() for p in policy.policy.parameters()) / 1e9:.2f}e9 parameters, dtype "
          f"{cfg.dtype}, {cfg.num_inference_steps} denoising steps, chunks of {cfg.chunk_size} "
          f"({cfg.n_action_steps} played); loaded in {load_s:.1f} s; torch threads {torch.get_num_threads()}")

    alone, times = [], []
    for seed, obs in episodes:
        policy.reset(prompt, seed=seed)
        actions = []
        for t, o in enumerate(obs):
            tick = time.perf_counter()
            actions.append(policy.act(StepInput(o, prompt)))
            if t % cfg.n_action_steps == 0:
                times.append(time.perf_counter() - tick)
        alone.append(np.stack(actions))
    budget = policy.prompt_budget(prompt)
    received = policy.received
    sessions = [policy.open_session() for _ in episodes]
    for session, (seed, _) in zip(sessions, episodes):
        policy.reset_session(session, prompt, seed)
    batched, batch_times = [[], []], []
    for t in range(steps):
        tick = time.perf_counter()
        for row, action in enumerate(policy.act_batch(sessions, [StepInput(obs[t], prompt) for _, obs in episodes])):
            batched[row].append(action)
        if t % cfg.n_action_steps == 0:
            batch_times.append(time.perf_counter() - tick)
    anon = peak.stop()
    diff = max(float(np.abs(np.stack(b) - a).max()) for a, b in zip(alone, batched))
    scale = max(float(np.abs(a).max()) for a in alone)
    mem = memory_kib()
    print(f"forward, batch of 1: {np.mean(times):.1f} s per chunk ({', '.join(f'{t:.1f}' for t in times)})")
    print(f"forward, batch of 2: {np.mean(batch_times):.1f} s per chunk of both episodes")
    print(f"batched vs alone: max |difference| {diff:.3g} (actions up to {scale:.3g}); seeds 0 and 1 differ by "
          f"{float(np.abs(alone[0] - alone[1]).max()):.3g}")
    print(f"peak memory: VmHWM {mem['VmHWM'] / 2**20:.2f} GiB, RssAnon {anon / 2**20:.2f} GiB")
    print(f"prompt: {budget.tokens} tokens, budget {budget.budget}, {budget.triplets_kept}/{budget.triplets_total} "
          f"triplets kept; the tokenizer got: {received.text[:60]!r} ... {received.text[-90:]!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
