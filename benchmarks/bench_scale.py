"""Scaling `sgvla eval` to many simulator workers: per-worker policy copies vs one batched policy server, and the
scripted policy's scaling, side by side in one run (issue 40.2).

For each worker count (`--workers 1,2,4,8`, every one run: nothing is skipped) the same plan runs three times, each
in a fresh process of its own:

* copies:   `policy_server: {serve: none}`: every worker loads its own copy of a learned policy and steps it at
            batch 1;
* server:   `policy_server: {serve: learned}`: one "sgvla-policy-server" process holds the only copy and batches
            the concurrent episodes' steps into one forward pass (`max_batch` = the largest worker count,
            `max_wait_ms` from `--max-wait-ms`, default 30 ms); its workers are lean (no torch: 40.1);
* scripted: the prompt-grounded policy, no server, the same workers rendering the same images, the same episodes:
            the simulator alone. Its scaling efficiency at N workers is episodes/h at N / (N x episodes/h at 1).

The learned policy is a random-weight LeRobot ACT built here (as `sgvla.policies.tiny.build_tiny_act`, but 512 wide
with 6 encoder and 6 decoder layers, and `n_action_steps=1`: every step of every episode is a forward pass). Its
batch-1 forward time is printed next to a simulator step's, so one can see that the forward pass dominates a step.
Episodes run `--max-steps` steps each (the random ACT never succeeds; the prompt-grounded policy does not finish a
pick-and-place in 20 steps), so every run does the same work per episode.

Per run: episodes, wall seconds of `run_plan` (worker and server start-up included), episodes per hour from that
wall time and "steady" episodes per hour (workers / mean episode time: start-up and the last episodes' tail left
out), peak resident memory (RSS) of every process of the run, sampled by a psutil thread every 0.2 s: the largest
worker's peak and the workers' mean peak (with one worker and no pool, the run's own process runs the episodes),
the server's, and the whole tree's; the start-up: from `run_plan`'s start to the first episode's start (its
record's end, seen by the sampler, less its wall time): worker processes, their imports, the first simulator
build, and the policy server's start when it serves; and the batch sizes the server formed
(`RunSummary.policy_server`). RSS counts pages shared between processes (shared libraries) once per process.

    .venv/bin/python benchmarks/bench_scale.py [--workers 1,2,4,8] [--episodes 16] [--max-steps 20]
                                               [--max-wait-ms 30]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402

SUITE = {"type": "libero_spatial", "render_profile": "fast", "image_size": 64}
ACT_SIZE = dict(dim_model=512, n_heads=8, dim_feedforward=2048, n_encoder_layers=6, n_decoder_layers=6)
CHUNK = 10
SAMPLE_S = 0.2
VARIANTS = ("copies", "server", "scripted")
LIBERO_WORKER_MIB = 700  # issue 40's bound on a LIBERO worker's resident memory with a served or scripted policy


# -- the policy ---------------------------------------------------------------------------------------


def build_policy(out_dir: Path) -> Path:
    """A random ACT (untrained ResNet-18 backbone, a 512-wide 6+6-layer transformer) that predicts a chunk every
    step (`n_action_steps=1`), saved with its processors as a checkpoint."""
    from lerobot.policies.act.configuration_act import ACTConfig

    from sgvla.policies.tiny import _features, _save

    cfg = ACTConfig(device="cpu", input_features=_features(), pretrained_backbone_weights=None, use_vae=False,
                    chunk_size=CHUNK, n_action_steps=1, **ACT_SIZE)
    return _save(cfg, out_dir, seed=0)


def step_costs(path: Path, batch: int, steps: int = 30, repeats: int = 10) -> dict:
    """Median ms of a simulator step (env step and scene state, as the eval loop does them) and of the policy's
    `act_batch` at batch 1 and `batch` (one forward pass each, processors included), in this process."""
    from sgvla.core.protocols import StepInput
    from sgvla.libero.env import make_backend
    from sgvla.policies.lerobot_vla import LeRobotPolicy

    backend = make_backend(0, render_profile=SUITE["render_profile"], image_size=SUITE["image_size"],
                           perturbation="ambiguous_prompt")
    obs = backend.reset(0)
    rng = np.random.default_rng(0)
    sim = []
    for _ in range(steps):
        t0 = time.perf_counter()
        obs, _, _ = backend.step(rng.uniform(-0.2, 0.2, 7))
        backend.scene()
        sim.append(time.perf_counter() - t0)
    policy = LeRobotPolicy(path)
    params = sum(p.numel() for p in policy.policy.parameters())
    step = StepInput(obs.raw, backend.task, None, {})
    forward = {}
    for size in (1, batch):
        sessions = [policy.open_session() for _ in range(size)]
        for s in sessions:
            policy.reset_session(s, backend.task, 0)
        warm: list[float] = []  # warm-up until 3 calls in a row are within 1.5x of the fastest (at most 40 calls):
        while len(warm) < 40 and not (len(warm) >= 6 and max(warm[-3:]) < 1.5 * min(warm)):  # fresh memory is
            t0 = time.perf_counter()  # slow to touch on this VM; the first calls can take 20x longer
            policy.act_batch(sessions, [step] * size)
            warm.append(time.perf_counter() - t0)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            policy.act_batch(sessions, [step] * size)
            times.append(time.perf_counter() - t0)
        forward[size] = 1000 * float(np.median(times))
    backend.close()
    import torch

    return {"sim_ms": 1000 * float(np.median(sim)), "forward_ms": forward, "params_m": params / 1e6,
            "torch_threads": torch.get_num_threads()}


# -- one run, in a process of its own ------------------------------------------------------------------


class TreeSampler(threading.Thread):
    """Every SAMPLE_S: RSS of this process and all its descendants; keeps the peak of the sum and each process's
    peak, and which process is the policy server (multiprocessing's name for it)."""

    def __init__(self, records: Path):
        super().__init__(daemon=True)
        import psutil

        self.psutil, self.me = psutil, psutil.Process()
        self.records, self.started = records, time.perf_counter()
        self.first_record_s: float | None = None  # seconds from the start to the first record line
        self.peak_total = 0
        self.peak_by_pid: dict[int, int] = {}
        self.roles: dict[int, str] = {self.me.pid: "main"}
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            self.sample()
            self._halt.wait(SAMPLE_S)
        self.sample()

    def sample(self) -> None:
        if self.first_record_s is None and self.records.is_file() and self.records.stat().st_size:
            self.first_record_s = time.perf_counter() - self.started
        for child in multiprocessing.active_children():
            if child.name == "sgvla-policy-server" and child.pid:
                self.roles[child.pid] = "server"
        total = 0
        for proc in [self.me, *self.me.children(recursive=True)]:
            try:
                rss = proc.memory_info().rss
                if proc.pid not in self.roles:
                    cmd = " ".join(proc.cmdline())
                    self.roles[proc.pid] = "tracker" if "resource_tracker" in cmd else "worker"
            except (self.psutil.NoSuchProcess, self.psutil.AccessDenied, self.psutil.ZombieProcess):
                continue
            total += rss
            self.peak_by_pid[proc.pid] = max(self.peak_by_pid.get(proc.pid, 0), rss)
        self.peak_total = max(self.peak_total, total)

    def stop(self) -> dict:
        self._halt.set()
        self.join()
        by_role: dict[str, list[int]] = {}
        for pid, peak in self.peak_by_pid.items():
            by_role.setdefault(self.roles.get(pid, "worker"), []).append(peak)
        return {"peak_total": self.peak_total, "by_role": by_role, "first_record_s": self.first_record_s}


def run_one(spec: dict) -> dict:
    """Run one plan (spec: variant, workers, episodes, max_steps, policy path, max_batch, max_wait_ms) under the
    sampler; what the parent tabulates."""
    import sgvla.plugins  # noqa: F401
    from sgvla.core.config import from_mapping
    from sgvla.eval.config import EvalConfig
    from sgvla.eval.runner import run_plan

    variant = spec["variant"]
    if variant == "scripted":
        policies, serve = [{"type": "prompt_grounded"}], "none"
    else:
        policies, serve = [{"type": "act", "path": spec["policy"]}], ("learned" if variant == "server" else "none")
    with tempfile.TemporaryDirectory(prefix="bench_scale_run_") as out:
        cfg = from_mapping(EvalConfig, dict(
            name=f"{variant}-w{spec['workers']}", suite=SUITE, policies=policies, tasks=[0],
            perturbations="ambiguous_prompt", modes=["standard"], episodes=spec["episodes"],
            max_steps=spec["max_steps"], workers=spec["workers"], render_images=True, output_dir=out,
            policy_server={"serve": serve, "max_batch": spec["max_batch"], "max_wait_ms": spec["max_wait_ms"]}))
        sampler = TreeSampler(Path(out) / "episodes.jsonl")
        sampler.start()
        t0 = time.perf_counter()
        summary = run_plan(cfg, progress=False)
        wall = time.perf_counter() - t0
        memory = sampler.stop()
        records = [json.loads(line) for line in Path(summary.path).read_text().splitlines() if line.strip()]
    return {**spec, "wall_s": wall, "recorded": summary.recorded, "planned": summary.planned,
            "complete": summary.complete, "stopped": summary.stopped, "infra_failed": summary.infra_failed,
            "episode_s": [r["wall_time_s"] for r in records], "steps": [r.get("steps") for r in records],
            "startup_s": (memory["first_record_s"] - records[0]["wall_time_s"]
                          if records and memory["first_record_s"] is not None else float("nan")),
            "policy_server": summary.policy_server, **memory}


def run_child(spec: dict, timeout_s: float) -> dict:
    """`run_one` in a fresh interpreter (so every run starts from nothing: no torch already in memory, no warm
    caches beyond the OS's)."""
    cmd = [sys.executable, __file__, "--_run", json.dumps(spec)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {**spec, "error": f"timed out after {timeout_s:.0f} s"}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    return {**spec, "error": f"exit {done.returncode}: {done.stderr[-1500:]}"}


# -- the tables ----------------------------------------------------------------------------------------


def mib(n: float) -> str:
    return f"{n / 2**20:.0f}"


def per_hour(r: dict) -> float:
    return 3600 * r["recorded"] / r["wall_s"] if r.get("recorded") else float("nan")


def steady_per_hour(r: dict) -> float:
    times = r.get("episode_s") or []
    return 3600 * r["workers"] / float(np.mean(times)) if times else float("nan")


def batch_text(r: dict) -> tuple[str, str]:
    stats = next(iter(r.get("policy_server", {}).values()), None)
    if not stats or not stats["batches"]:
        return "-", "-"
    sizes = {int(k): v for k, v in stats["batch_sizes"].items()}
    return f"{stats['steps'] / stats['batches']:.2f}", " ".join(f"{k}:{v}" for k, v in sorted(sizes.items()))


def worker_peaks(r: dict) -> list[int]:
    """Each simulator worker's peak RSS (bytes); with no worker processes (one worker, run inline) the run's own."""
    roles = r["by_role"]
    return roles.get("worker") or roles.get("main") or []


def efficiency(results: dict, w: int, rate) -> float:
    """The scripted runs' scaling efficiency at `w` workers: `rate` at w / (w x `rate` at 1)."""
    one, at = results.get(("scripted", 1), {}), results[("scripted", w)]
    if "error" in one or "error" in at or not one:
        return float("nan")
    return rate(at) / (w * rate(one))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", default="1,2,4,8", help="comma-separated simulator worker counts")
    parser.add_argument("--episodes", type=int, default=16, help="episodes per run")
    parser.add_argument("--max-steps", type=int, default=20, help="steps per episode")
    parser.add_argument("--max-wait-ms", type=float, default=30.0, help="the server's batching wait")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds one run may take")
    parser.add_argument("--_run", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._run:
        print("RESULT " + json.dumps(run_one(json.loads(args._run))), flush=True)
        return

    started = time.perf_counter()
    workers = [int(w) for w in args.workers.split(",")]
    max_batch = max(workers)
    command = ".venv/bin/python benchmarks/bench_scale.py " + " ".join(
        f"--{k} {shlex.quote(str(v))}" for k, v in (("workers", args.workers), ("episodes", args.episodes),
                                                     ("max-steps", args.max_steps), ("max-wait-ms", args.max_wait_ms)))
    with tempfile.TemporaryDirectory(prefix="bench_scale_") as tmp:
        policy = build_policy(Path(tmp) / "act_wide")
        cost = step_costs(policy, max_batch)
        f1, fb = cost["forward_ms"][1], cost["forward_ms"][max_batch]
        print(f"## Policy: random ACT, {cost['params_m']:.1f} M parameters ({ACT_SIZE}, n_action_steps=1: one forward "
              f"pass per step); torch threads per process: {cost['torch_threads']}, CPU cores: {os.cpu_count()}\n")
        print("| cost (median, one process alone) | ms |")
        print("|---|---|")
        print(f"| simulator step (env step + scene state, {SUITE['image_size']}px, 2 cameras) | {cost['sim_ms']:.1f} |")
        print(f"| policy act, batch 1 (processors + forward) | {f1:.1f} ({f1 / cost['sim_ms']:.1f}x a sim step) |")
        print(f"| policy act, batch {max_batch} | {fb:.1f} ({fb / max_batch:.1f} per step, "
              f"{max_batch * f1 / fb:.1f}x batch 1's throughput) |\n", flush=True)

        results: dict[tuple[str, int], dict] = {}
        for w in workers:
            for variant in VARIANTS:
                spec = dict(variant=variant, workers=w, episodes=args.episodes, max_steps=args.max_steps,
                            policy=str(policy), max_batch=max_batch, max_wait_ms=args.max_wait_ms)
                r = results[(variant, w)] = run_child(spec, args.timeout)
                if "error" in r:
                    print(f"  {variant} w{w}: FAILED {r['error']}", flush=True)
                else:
                    print(f"  {variant:8s} w{w}: {r['recorded']}/{r['planned']} episodes of {np.mean(r['steps']):.1f} "
                          f"steps in {r['wall_s']:.1f} s, worker peak RSS {mib(max(worker_peaks(r)))} MiB, "
                          f"{batch_text(r)}", flush=True)

    print(f"\n## Copies vs server vs scripted ({args.episodes} episodes per run, {args.max_steps} steps each, "
          f"LIBERO-Spatial task 0, max_batch {max_batch}, max_wait_ms {args.max_wait_ms:g})\n")
    head = ("| workers | policy | episodes | wall s | episodes/h | steady episodes/h | server/copies (wall, steady) | "
            "scaling efficiency (wall, steady) | worker peak RSS MiB (max, mean; 1 worker: the run's process) | server RSS MiB | tree peak RSS MiB | "
            "start-up s | mean batch | batch sizes |")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for w in workers:
        for variant in VARIANTS:
            r = results[(variant, w)]
            if "error" in r:
                print(f"| {w} | {variant} | failed: {r['error'][:80]!r} |")
                continue
            ratio = scaling = ""
            other = results[("copies", w)]
            if variant == "server" and "error" not in other:
                ratio = f"{per_hour(r) / per_hour(other):.2f}x, {steady_per_hour(r) / steady_per_hour(other):.2f}x"
            if variant == "scripted":
                scaling = f"{efficiency(results, w, per_hour):.2f}, {efficiency(results, w, steady_per_hour):.2f}"
            peaks = worker_peaks(r)
            server_rss = mib(max(r["by_role"]["server"])) if r["by_role"].get("server") else "-"
            mean, hist = batch_text(r)
            print(f"| {w} | {variant} | {r['recorded']} | {r['wall_s']:.1f} | {per_hour(r):.0f} | "
                  f"{steady_per_hour(r):.0f} | {ratio} | {scaling} | {mib(max(peaks))}, {mib(np.mean(peaks))} | "
                  f"{server_rss} | {mib(r['peak_total'])} | {r['startup_s']:.1f} | {mean} | {hist} |")

    print("\n## Goals (issue 40)\n")
    hi = max(workers)
    s, c = results[("server", hi)], results[("copies", hi)]
    if "error" not in s and "error" not in c:
        wall_ratio, steady_ratio = per_hour(s) / per_hour(c), steady_per_hour(s) / steady_per_hour(c)
        print(f"- throughput: with {hi} workers, the server's episodes/hour >= 3x the per-worker copies': "
              f"{per_hour(s):.0f} vs {per_hour(c):.0f} = {wall_ratio:.2f}x (wall) -> "
              f"{'MET' if wall_ratio >= 3 else 'NOT MET'}; steady {steady_ratio:.2f}x -> "
              f"{'MET' if steady_ratio >= 3 else 'NOT MET'}")
    else:
        print(f"- throughput: the {hi}-worker server or copies run failed (see the table): not judged")
    lean = [max(results[(v, w)]["by_role"]["worker"]) for v in ("server", "scripted") for w in workers
            if "error" not in results[(v, w)] and results[(v, w)]["by_role"].get("worker")]  # worker processes only
    if lean:
        print(f"- memory: a LIBERO worker process with a served or scripted policy (rendering {SUITE['image_size']} px "
              f"images) <= {LIBERO_WORKER_MIB} MiB resident: largest peak {mib(max(lean))} MiB -> "
              f"{'MET' if max(lean) <= LIBERO_WORKER_MIB * 2**20 else 'NOT MET'}")
    print("- scripted scaling efficiency: " + ", ".join(
        f"{w} workers {efficiency(results, w, per_hour):.2f} (steady {efficiency(results, w, steady_per_hour):.2f})"
        for w in workers if "error" not in results[("scripted", w)]))
    print("\nepisodes/h: episodes / wall time of run_plan (start-up of workers and server included); steady: "
          "workers / mean episode time. scaling efficiency (scripted): episodes/h at N / (N x episodes/h at 1).")
    print(f"\ncommand: {command}")
    print(f"total runtime: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
