"""Ground truth per camera from geoms, poses and cameras, end to end."""

import numpy as np

from sgvla.scene_graph import (
    Camera,
    GeomBatch,
    Graph,
    ObjectGeoms,
    ground_truth_batch,
    ground_truth_graphs,
)

K = np.array([[100.0, 0.0, 64.0], [0.0, 100.0, 64.0], [0.0, 0.0, 1.0]])
TASK = "pick up the black bowl next to the plate and place it on the plate"
NAMES = ["akita_black_bowl_1", "plate_1", "cookies_1"]


def looking_down(x: float, y: float, height: float) -> np.ndarray:
    """Camera above (x, y) looking straight down: OpenCV z = world -z, image x = world +x, y = world -y."""
    pose = np.eye(4)
    pose[:3, :3] = np.diag([1.0, -1.0, -1.0])
    pose[:3, 3] = (x, y, height)
    return pose


def scene():
    # Bowl resting on the plate at the origin, cookies 0.3 m along +x, all on a table at z = 0.9.
    positions = np.array([[0.0, 0.0, 0.95], [0.0, 0.0, 0.91], [0.3, 0.0, 0.93]])
    half = np.array([[0.04, 0.04, 0.03], [0.09, 0.09, 0.01], [0.05, 0.08, 0.03]])
    geoms = [ObjectGeoms(p[None], np.eye(3)[None], h[None]) for p, h in zip(positions, half)]
    cameras = {
        "agentview": Camera("agentview", K, looking_down(0.15, 0.0, 2.5), 128, 128),
        # The wrist camera hovers low over the bowl and only sees the bowl and the plate.
        "robot0_eye_in_hand": Camera("robot0_eye_in_hand", K, looking_down(0.0, 0.0, 1.15), 128, 128),
    }
    return positions, geoms, cameras


def test_agentview_and_wrist_graphs():
    positions, geoms, cameras = scene()
    views = ground_truth_graphs(NAMES, geoms, positions, cameras, TASK)
    agentview, wrist = views["agentview"], views["robot0_eye_in_hand"]
    assert set(agentview.boxes) == set(NAMES)
    assert agentview.graph == Graph.of(
        [
            ("akita_black_bowl_1", "is_on_top_of", "plate_1"),
            ("plate_1", "is_below_of", "akita_black_bowl_1"),
            ("akita_black_bowl_1", "is_behind", "cookies_1"),
            ("cookies_1", "is_in_front_of", "akita_black_bowl_1"),
            ("plate_1", "is_behind", "cookies_1"),
            ("cookies_1", "is_in_front_of", "plate_1"),
        ]
    )
    # Visibility-filtered by wrist boxes, world-frame relations: the agentview graph restricted to what it sees.
    assert set(wrist.boxes) == {"akita_black_bowl_1", "plate_1"}
    assert wrist.graph == Graph.of(t for t in agentview.graph if "cookies_1" not in (t.subject, t.object))
    assert all(isinstance(c, int) for box in wrist.boxes.values() for c in box)


def test_batch_matches_single_frames_with_a_moving_camera():
    positions, geoms, cameras = scene()
    frames = 4
    shift = np.linspace(0.0, 0.6, frames)
    moving_positions = np.repeat(positions[None], frames, axis=0)
    moving_positions[:, 0, 0] += shift  # the bowl slides along +x past the cookies
    batch_geoms = GeomBatch(
        np.arange(3),
        moving_positions,
        np.repeat(np.eye(3)[None, None], frames, axis=0).repeat(3, axis=1),
        np.array([g.half_sizes[0] for g in geoms]),
        3,
    )
    wrist_poses = np.stack([looking_down(s, 0.0, 1.15) for s in shift])
    batch_cameras = {"agentview": cameras["agentview"], "robot0_eye_in_hand": Camera("w", K, wrist_poses, 128, 128)}
    batch = ground_truth_batch(NAMES, batch_geoms, moving_positions, batch_cameras, TASK)
    for f in range(frames):
        frame_geoms = [
            ObjectGeoms(moving_positions[f, i][None], np.eye(3)[None], geoms[i].half_sizes) for i in range(3)
        ]
        single = {"agentview": cameras["agentview"], "robot0_eye_in_hand": Camera("w", K, wrist_poses[f], 128, 128)}
        expected = ground_truth_graphs(NAMES, frame_geoms, moving_positions[f], single, TASK)
        for view in batch:
            assert batch[view].frame(f) == expected[view]
            assert batch[view].graphs()[f] == expected[view].graph
    bowl_vs_cookies = [g.graph for g in (batch["agentview"].frame(f) for f in range(frames))]
    assert ("akita_black_bowl_1", "is_behind", "cookies_1") in bowl_vs_cookies[0]
    assert ("akita_black_bowl_1", "is_in_front_of", "cookies_1") in bowl_vs_cookies[-1]
