"""Speed of the scene-graph core on one CPU core, against a straightforward version of the same rules.

    python benchmarks/bench_scene_graph.py [--frames 20000] [--straight-frames 500] [--size 256] [--repeats 3]

1. Ground truth: 7 LIBERO-Spatial objects (1-12 box geoms each) on a table near the
   world origin, a fixed agentview camera and a moving wrist camera, for every
   frame of a synthetic pick-and-place trajectory. The array path
   (``ground_truth_batch`` + ``ViewBatch.graphs``) is timed against a per-object,
   per-pair Python version written like the reference generator; both must give
   identical graphs (same triplets, same order). Each version runs once to warm
   up, then ``--repeats`` times; the best time counts.
2. Scoring: 124,500 frames (the benchmark's size) of noisy predictions against
   their references with :func:`aggregate`, from Graph objects to every metric.

Targets: >= 5,000 ground-truth frames/s, >= 20x the straightforward version,
scoring < 10 s. Exits 1 when one is missed.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from sgvla.scene_graph import (  # noqa: E402
    Camera,
    GeomBatch,
    Graph,
    RelationParams,
    TripletCodec,
    aggregate,
    ground_truth_batch,
    load_ontology,
)

TASK = "pick up the black bowl in the top drawer of the wooden cabinet and place it on the plate"
# name: (table position x, y, object half extent, object height, number of geoms)
LAYOUT = {
    "akita_black_bowl_1": ((0.05, 0.10), 0.045, 0.05, 8),
    "akita_black_bowl_2": ((-0.12, -0.05), 0.045, 0.05, 8),
    "cookies_1": ((0.12, -0.18), 0.05, 0.03, 1),
    "glazed_rim_porcelain_ramekin_1": ((-0.05, 0.22), 0.035, 0.04, 6),
    "plate_1": ((0.10, -0.02), 0.09, 0.015, 4),
    "wooden_cabinet_1": ((-0.25, 0.30), 0.12, 0.22, 12),
    "flat_stove_1": ((-0.20, -0.25), 0.10, 0.02, 3),
}
TABLE_Z = 0.9
TARGETS = {"agentview": 5000.0, "ratio": 20.0, "scoring_s": 10.0}


def pin_to_one_core() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def yaw(angle: np.ndarray) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    zero, one = np.zeros_like(angle), np.ones_like(angle)
    return np.stack([np.stack([c, -s, zero], -1), np.stack([s, c, zero], -1), np.stack([zero, zero, one], -1)], -2)


def look_at(position: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Camera-to-world poses in OpenCV axes (x right, y down, z forward), as robosuite returns them."""
    forward = target - position
    forward /= np.linalg.norm(forward, axis=-1, keepdims=True)
    up = np.broadcast_to([0.0, 0.0, 1.0], forward.shape)
    right = np.cross(forward, up)
    right /= np.linalg.norm(right, axis=-1, keepdims=True)
    down = np.cross(forward, right)
    pose = np.zeros((*forward.shape[:-1], 4, 4))
    pose[..., :3, 0], pose[..., :3, 1], pose[..., :3, 2], pose[..., :3, 3] = right, down, forward, position
    pose[..., 3, 3] = 1.0
    return pose


def intrinsics(size: int, fovy_deg: float = 45.0) -> np.ndarray:
    f = 0.5 * size / np.tan(np.radians(fovy_deg) / 2)
    return np.array([[f, 0.0, size / 2], [0.0, f, size / 2], [0.0, 0.0, 1.0]])


def synthetic_episode(frames: int, size: int, seed: int = 0):
    """Names, geoms, body positions and cameras of one pick-and-place trajectory."""
    rng = np.random.default_rng(seed)
    names = tuple(LAYOUT)
    t = np.linspace(0.0, 1.0, frames)
    positions = np.zeros((frames, len(names), 3))
    yaws = np.zeros((frames, len(names)))
    for i, ((x, y), _, height, _) in enumerate(LAYOUT.values()):
        positions[:, i] = (x, y, TABLE_Z + height)
        positions[:, i] += rng.normal(0.0, 0.002, (frames, 3))
        yaws[:, i] = rng.uniform(-np.pi, np.pi) + 0.05 * np.sin(6 * t + i)
    bowl, plate = positions[:, 0].copy(), positions[:, names.index("plate_1")]
    lift = np.sin(np.pi * t) * 0.25
    positions[:, 0] = bowl + (plate - bowl) * t[:, None] + np.stack([0 * t, 0 * t, lift], -1)

    geom_object, local_centers, local_rot, half_sizes = [], [], [], []
    for i, (_, (_, extent, height, n_geoms)) in enumerate(LAYOUT.items()):
        for _ in range(n_geoms):
            geom_object.append(i)
            local_centers.append(rng.uniform(-0.5, 0.5, 3) * (extent, extent, height))
            local_rot.append(yaw(np.array(rng.uniform(-np.pi, np.pi))))
            half_sizes.append(rng.uniform(0.3, 0.7, 3) * (extent, extent, height))
    geom_object = np.array(geom_object)
    body_rot = yaw(yaws)[:, geom_object]  # (F, G, 3, 3)
    centers = positions[:, geom_object] + np.einsum("fgij,gj->fgi", body_rot, np.array(local_centers))
    rotations = body_rot @ np.array(local_rot)
    geoms = GeomBatch(geom_object, centers, rotations, np.array(half_sizes), len(names))

    K = intrinsics(size)
    agentview = Camera("agentview", K, look_at(np.array([1.0, 0.0, 1.6]), np.array([0.0, 0.0, TABLE_Z])), size, size)
    gripper = positions[:, 0] + np.array([-0.15, 0.0, 0.40])
    wrist_pose = look_at(gripper, positions[:, 0] + np.array([0.05, 0.0, -0.05]))
    wrist = Camera("robot0_eye_in_hand", K, wrist_pose, size, size)
    return names, geoms, positions, {"agentview": agentview, "robot0_eye_in_hand": wrist}


# --- The straightforward version: one object and one pair at a time, like the reference. ---

_SIGNS = np.array([(sx, sy, sz) for sx in (-1.0, 1.0) for sy in (-1.0, 1.0) for sz in (-1.0, 1.0)])


def straight_box(centers, rotations, sizes, extrinsic_inv, K, h, w, params):
    local = sizes[:, None, :] * _SIGNS[None, :, :]
    world = (centers[:, None, :] + np.einsum("gij,gkj->gki", rotations, local)).reshape(-1, 3)
    homogeneous = np.concatenate([world, np.ones((len(world), 1))], axis=1)
    cam = homogeneous @ extrinsic_inv.T
    cam = cam[cam[:, 2] > params.min_depth]
    if cam.size == 0:
        return None
    us = (K[0, 0] * cam[:, 0] / cam[:, 2] + K[0, 2]).astype(np.int64)
    vs = (h - (K[1, 1] * cam[:, 1] / cam[:, 2] + K[1, 2])).astype(np.int64)
    pad = params.pad_px
    rx1, ry1, rx2, ry2 = int(us.min()) - pad, int(vs.min()) - pad, int(us.max()) + pad, int(vs.max()) + pad
    if rx2 - rx1 > w * params.max_box_scale or ry2 - ry1 > h * params.max_box_scale:
        return None
    x1, y1, x2, y2 = max(0, rx1), max(0, ry1), min(w, rx2), min(h, ry2)
    return (x1, y1, x2, y2) if x1 < x2 and y1 < y2 else None


def straight_graph(boxes, world, task, params):
    drawer_task = params.drawer_task_marker in task.replace("_", " ")
    objects = sorted(boxes)
    triplets = []
    for a in objects:
        for b in objects:
            if a == b:
                continue
            pa, pb = world[a], world[b]
            ax1, ay1, ax2, ay2 = boxes[a]
            bx1, by1, bx2, by2 = boxes[b]
            ix1, iy1, ix2, iy2 = max(ax1, bx1), max(ay1, by1), min(ax2, bx2), min(ay2, by2)
            if ix2 > ix1 and iy2 > iy1:
                inter = (ix2 - ix1) * (iy2 - iy1)
                io_min = inter / min((ax2 - ax1) * (ay2 - ay1), (bx2 - bx1) * (by2 - by1))
                if io_min > params.overlap_threshold and (params.vertical_keyword in a or params.vertical_keyword in b):
                    if drawer_task and {a, b} == set(params.drawer_pair):
                        triplets.append((a, "is_inside" if pa[2] >= pb[2] else "contains", b))
                    else:
                        triplets.append((a, "is_on_top_of" if pa[2] >= pb[2] else "is_below_of", b))
                    continue
            dx, dy = pa[0] - pb[0], pa[1] - pb[1]
            if abs(dx) >= abs(dy):
                triplets.append((a, "is_in_front_of" if dx > 0 else "is_behind", b))
            else:
                triplets.append((a, "is_left_of" if dy > 0 else "is_right_of", b))
    return triplets


def straight_ground_truth(names, geoms, positions, cameras, task, params, frames):
    per_object = [np.flatnonzero(geoms.geom_object == i) for i in range(len(names))]
    graphs = {view: [] for view in cameras}
    for f in range(frames):
        world = {name: positions[f, i].tolist() for i, name in enumerate(names)}
        for view, cam in cameras.items():
            pose = cam.cam_to_world if cam.cam_to_world.ndim == 2 else cam.cam_to_world[f]
            ext_inv = np.linalg.inv(pose)
            boxes = {}
            for i, name in enumerate(names):
                g = per_object[i]
                box = straight_box(
                    geoms.centers[f, g],
                    geoms.rotations[f, g],
                    geoms.half_sizes[g],
                    ext_inv,
                    cam.K,
                    cam.height,
                    cam.width,
                    params,
                )
                if box is not None:
                    boxes[name] = box
            graphs[view].append(straight_graph(boxes, world, task, params))
    return graphs


# --- Scoring data: noisy predictions of reference graphs. ---


def noisy_predictions(refs: list[Graph], ontology, seed: int = 1) -> list[Graph]:
    """Drop a third of each reference, reverse some triplets, add random ones, swap the bowls every 5th frame."""
    rng = np.random.default_rng(seed)
    codec = TripletCodec(ontology.objects)
    masks = codec.encode(refs)
    frames, n = masks.shape[:2]
    kept = masks & (rng.random(masks.shape + (8,)) > 0.33).astype(np.uint8).dot(1 << np.arange(8)).astype(np.uint8)
    reversed_ = masks.transpose(0, 2, 1) & (rng.random(masks.shape) < 0.05) * np.uint8(255)
    noise = (rng.random(masks.shape) < 0.05) * (np.uint8(1) << rng.integers(0, 8, masks.shape, dtype=np.uint8))
    preds = (kept | reversed_ | noise.astype(np.uint8)) * ~np.eye(n, dtype=bool)
    bowls = [ontology.objects.index(name) for name in ontology.interchangeable[0]]
    swap = np.arange(n)
    swap[bowls] = bowls[::-1]
    every_fifth = np.arange(frames) % 5 == 0
    preds[every_fifth] = preds[every_fifth][:, swap][:, :, swap]
    return codec.decode(preds.astype(np.uint8))


def table_row(step: object, frames: object, seconds: object, rate: object, target: object) -> str:
    return f"| {step:<36} | {frames:>7} | {seconds:>8} | {rate:>9} | {target:<11} |"


def best_of(repeats: int, run):
    """Shortest time of ``repeats`` runs after one warm-up run, and the last result."""
    result = run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return min(times), result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=20000, help="frames for the fast ground-truth timing")
    parser.add_argument("--straight-frames", type=int, default=500, help="frames for the straightforward version")
    parser.add_argument("--size", type=int, default=256, help="image width and height")
    parser.add_argument("--score-frames", type=int, default=124500)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each ground-truth version (best is kept)")
    args = parser.parse_args(argv)
    pin_to_one_core()
    params = RelationParams()
    ontology = load_ontology("libero_spatial")

    names, geoms, positions, cameras = synthetic_episode(args.frames, args.size)
    n_straight = min(args.straight_frames, args.frames)

    def fast() -> dict[str, list[Graph]]:
        batch = ground_truth_batch(names, geoms, positions, cameras, TASK, params)
        return {view: views.graphs() for view, views in batch.items()}

    fast_s, fast_graphs = best_of(args.repeats, fast)
    straight_s, straight = best_of(
        args.repeats, lambda: straight_ground_truth(names, geoms, positions, cameras, TASK, params, n_straight)
    )
    fast_fps, straight_fps = args.frames / fast_s, n_straight / straight_s
    mismatches = sum(
        list(map(tuple, fast_graphs[view][f])) != straight[view][f] for view in cameras for f in range(n_straight)
    )
    ratio = fast_fps / straight_fps

    refs = [g for view in cameras for g in fast_graphs[view]]
    refs = (refs * (args.score_frames // len(refs) + 1))[: args.score_frames]
    preds = noisy_predictions(refs, ontology)
    frames = [(k % 10, p, r) for k, (p, r) in enumerate(zip(preds, refs))]
    start = time.perf_counter()
    scores = aggregate(frames, ontology)
    scoring_s = time.perf_counter() - start

    mean_triplets = {view: np.mean([len(g) for g in fast_graphs[view]]) for view in cameras}
    print(
        f"scene-graph core, one core, {len(names)} objects, {geoms.half_sizes.shape[0]} geoms, "
        f"{len(cameras)} cameras, {args.size}x{args.size} images"
    )
    print("mean triplets/frame: " + ", ".join(f"{v} {m:.1f}" for v, m in mean_triplets.items()))
    print()
    print(table_row("step", "frames", "seconds", "frames/s", "target"))
    print(table_row("-" * 36, "-" * 7, "-" * 8, "-" * 9, "-" * 11))
    print(table_row("ground truth, arrays", args.frames, f"{fast_s:.3f}", f"{fast_fps:.0f}", ">= 5000/s"))
    print(table_row("ground truth, straightforward", n_straight, f"{straight_s:.3f}", f"{straight_fps:.0f}", ""))
    print(table_row("speed-up (arrays / straightforward)", "", "", f"{ratio:.1f}x", ">= 20x"))
    print(table_row("scoring (aggregate)", len(frames), f"{scoring_s:.3f}", f"{len(frames) / scoring_s:.0f}", "< 10 s"))
    print()
    print(f"graphs identical on {n_straight} frames x {len(cameras)} cameras: {mismatches == 0} ({mismatches} differ)")
    print(
        f"scores: mean task F1 {scores.mean_task_f1:.4f}, micro F1 {scores.micro.f1:.4f}, "
        f"swapped frames {scores.swapped_frames}"
    )

    failures = []
    if mismatches:
        failures.append(f"{mismatches} graphs differ between the two versions")
    if fast_fps < TARGETS["agentview"]:
        failures.append(f"{fast_fps:.0f} frames/s < {TARGETS['agentview']:.0f}")
    if ratio < TARGETS["ratio"]:
        failures.append(f"speed-up {ratio:.1f}x < {TARGETS['ratio']:.0f}x")
    if scoring_s >= TARGETS["scoring_s"]:
        failures.append(f"scoring took {scoring_s:.1f} s >= {TARGETS['scoring_s']:.0f} s")
    for failure in failures:
        print(f"FAIL: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
