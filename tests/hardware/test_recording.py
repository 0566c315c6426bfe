"""Teleoperated recording into LeRobot datasets: whole episodes only, operator commands, crash safety,
and `sgvla record` end to end against the simulated bus with synthetic cameras."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml
from lerobot.datasets.lerobot_dataset import LeRobotDataset

from sgvla.so101.hardware.cameras import Camera, SyntheticCameraConfig
from sgvla.so101.hardware.joints import JOINTS
from sgvla.so101.hardware.recording import (
    ABORT,
    QUIT,
    RERECORD,
    SAVE,
    START,
    EpisodeStore,
    KeyQueue,
    RecordingError,
    TeleopRecorder,
    TerminalKeys,
    dataset_features,
)
from sgvla.paths import REPO_ROOT

TASK = "put the black bowl on the stove"
SMALL = {"agentview": (24, 32, True), "wrist": (24, 32, False)}
DEG_PER_STEP = 360 / 4095


def frame(i: int, task: str = TASK) -> dict:
    return {"observation.state": np.full(6, i, np.float32), "action": np.full(6, i + 0.5, np.float32), "task": task,
            "observation.images.agentview": np.full((24, 32, 3), i, np.uint8),
            "observation.images.agentview_depth": np.full((24, 32, 1), 700 + i, np.uint16),
            "observation.images.wrist": np.full((24, 32, 3), 255 - i, np.uint8)}


def store(root) -> EpisodeStore:
    return EpisodeStore(root, "local/test", 30, dataset_features(SMALL), image_writer_threads=1)


def load(root) -> LeRobotDataset:
    return LeRobotDataset("local/test", root=root, video_backend="pyav")


def record_episode(s: EpisodeStore, frames: int, start: int = 0) -> None:
    for i in range(start, start + frames):
        s.add(frame(i))


def test_episodes_are_saved_whole_and_unsaved_ones_never_appear(tmp_path):
    root = tmp_path / "ds"
    s = store(root)
    record_episode(s, 5)
    assert s.commit() == 1
    record_episode(s, 3, start=100)
    s.discard()  # abort: nothing of it may remain
    record_episode(s, 4, start=10)
    assert s.commit() == 2
    record_episode(s, 2, start=200)
    s.close()  # quit mid-episode: dropped
    ds = load(root)
    assert ds.num_episodes == 2 and len(ds) == 9
    assert [float(ds[i]["action"][0]) for i in range(9)] == [0.5, 1.5, 2.5, 3.5, 4.5, 10.5, 11.5, 12.5, 13.5]
    assert ds[6]["task"] == TASK and int(ds[6]["episode_index"]) == 1
    assert int(ds[7]["observation.images.agentview_depth"].float().mean()) == 712
    assert not [p for p in (root / "images").rglob("*") if p.is_file()]  # no staging frames left


def test_an_interrupted_save_is_rolled_back_when_the_dataset_is_reopened(tmp_path, monkeypatch):
    root = tmp_path / "ds"
    s = store(root)
    record_episode(s, 5)
    s.commit()
    record_episode(s, 6, start=50)

    def crash():
        raise KeyboardInterrupt("power cut after the episode's files were written, before they were finalized")
    monkeypatch.setattr(s.dataset, "finalize", crash)
    with pytest.raises(KeyboardInterrupt):
        s.commit()
    monkeypatch.undo()
    reopened = store(root)  # rolls back the half-saved episode
    assert reopened.episodes == 1
    record_episode(reopened, 3, start=20)
    reopened.commit()
    reopened.close()
    ds = load(root)
    assert ds.num_episodes == 2 and len(ds) == 8
    assert [float(ds[i]["action"][0]) for i in range(5, 8)] == [20.5, 21.5, 22.5]


KILLED_WRITER = """
import sys, time
import numpy as np
sys.path.insert(0, {tests!r})
from test_recording import store, record_episode
s = store({root!r})
record_episode(s, 4)
s.commit()
record_episode(s, 50, start=10)
print("recording", flush=True)
time.sleep(60)
"""


@pytest.mark.integration
def test_a_killed_recorder_leaves_finished_episodes_readable(tmp_path):
    root = tmp_path / "ds"
    script = KILLED_WRITER.format(tests=str(REPO_ROOT / "tests" / "hardware"), root=str(root))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "recording"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    s = store(root)
    assert s.episodes == 1
    s.close()
    assert len(load(root)) == 4


def test_features_of_an_existing_dataset_must_match(tmp_path):
    root = tmp_path / "ds"
    s = store(root)
    record_episode(s, 3)
    s.commit()
    s.close()
    with pytest.raises(RecordingError, match="other features or fps"):
        EpisodeStore(root, "local/test", 30, dataset_features({"agentview": (24, 32, False)}))


class Scripted(KeyQueue):
    """Commands at given ticks, as an operator would press them."""

    def __init__(self, at: dict[int, str]):
        super().__init__()
        self.at, self.ticks = at, 0

    def poll(self):
        self.ticks += 1
        return self.at.get(self.ticks)


def synthetic(name: str, depth: bool) -> Camera:
    return Camera(SyntheticCameraConfig(name=name, width=32, height=24, fps=30, depth=depth)).start()


def test_operator_commands_rerecord_abort_save_quit(tmp_path, follower, leader):
    cameras = [synthetic("agentview", True), synthetic("wrist", False)]
    keys = Scripted({2: START, 6: RERECORD, 10: SAVE, 12: START, 14: ABORT, 16: START, 19: SAVE, 21: START, 23: QUIT})
    s = store(tmp_path / "ds")
    try:
        stats = TeleopRecorder(follower, leader, cameras, s, TASK, 30, keys, num_episodes=5, episode_time_s=60).run()
    finally:
        for c in cameras:
            c.close()
    assert (stats.saved, stats.discarded) == (2, 3)  # re-record, abort and quit each drop the episode in progress
    # A frame per tick, and one more per period a tick came late (a loaded machine): the clock's frames.
    assert [load(tmp_path / "ds").meta.episodes[i]["length"] for i in range(2)] == [4 + stats.filled[0],
                                                                                    3 + stats.filled[1]]


def test_scene_graphs_are_stored_with_each_frame(tmp_path, follower, leader):
    camera = synthetic("agentview", False)
    s = EpisodeStore(tmp_path / "ds", "local/test", 30, dataset_features({"agentview": (24, 32, False)}, True))

    def graph(images, task):
        assert images["agentview"].shape == (24, 32, 3) and task == TASK
        return json.dumps({"triplets": [["black_bowl", "is_left_of", "black_stove"]]})
    try:
        stats = TeleopRecorder(follower, leader, [camera], s, TASK, 30, Scripted({1: START, 5: SAVE}), num_episodes=1,
                               episode_time_s=60, scene_graph=graph).run()
    finally:
        camera.close()
    ds = load(tmp_path / "ds")
    assert len(ds) == 4 + stats.filled[0] and json.loads(ds[3]["scene_graph"])["triplets"][0][2] == "black_stove"


def test_a_late_tick_records_the_frames_the_clock_owes(tmp_path, follower, leader):
    """A loop held up for 0.2 s (a loaded machine) still leaves frame k at k/fps: the late tick records the six
    frames it owes with its inputs, counted as filled, instead of an episode that replays faster than it ran."""
    camera = synthetic("agentview", False)
    s = EpisodeStore(tmp_path / "ds", "local/test", 30, dataset_features({"agentview": (24, 32, False)}))
    recorder = TeleopRecorder(follower, leader, [camera], s, TASK, 30, Scripted({1: START, 4: SAVE}), num_episodes=1,
                              episode_time_s=60)
    try:
        recorder.tick()  # the start
        recorder.tick()  # frame 0
        time.sleep(0.2)
        recorder.tick()  # 6 periods after frame 0: frames 1-6
        frames = s.frames
        assert frames >= 7, frames
        recorder.tick()  # early for the clock: one frame, none owed; then the save
        assert recorder.done and recorder.stats.frames == frames + 1 and recorder.stats.filled == [frames - 2]
    finally:
        camera.close()
        s.close()
    ds = load(tmp_path / "ds")
    assert len(ds) == frames + 1
    state = np.stack([ds[i]["observation.state"].numpy() for i in range(2, frames)])
    assert np.ptp(state, axis=0).max() == 0.0  # the filled frames repeat the late tick's inputs


def test_arm_fault_mid_episode_discards_it_and_keeps_the_saved_ones(tmp_path, rig, follower, leader):
    cameras = [synthetic("agentview", True), synthetic("wrist", False)]
    s = store(tmp_path / "ds")
    keys = Scripted({1: START, 5: SAVE, 6: START})
    recorder = TeleopRecorder(follower, leader, cameras, s, TASK, 30, keys, num_episodes=3, episode_time_s=60)
    try:
        for _ in range(9):
            recorder.tick()
        rig.follower.remove(2)
        with pytest.raises(Exception, match=r"shoulder_lift \(id 2\) stopped answering"):
            recorder.run()
    finally:
        for c in cameras:
            c.close()
    assert recorder.stats.discarded == 1 and s.frames == 0
    assert load(tmp_path / "ds").num_episodes == 1


def test_lost_camera_discards_the_episode(tmp_path, follower, leader):
    camera = synthetic("agentview", True)
    s = EpisodeStore(tmp_path / "ds", "local/test", 30, dataset_features({"agentview": (24, 32, True)}))
    keys = Scripted({1: START})
    recorder = TeleopRecorder(follower, leader, [camera], s, TASK, 30, keys, num_episodes=1, episode_time_s=60)
    try:
        for _ in range(3):
            recorder.tick()
            time.sleep(0.04)
        camera.source.unplug(0.5)
        time.sleep(0.1)
        recorder.tick()
        assert not recorder.recording and recorder.stats.discarded == 1 and s.frames == 0
    finally:
        camera.close()
        s.close()


def test_a_start_waits_for_a_reconnecting_camera(tmp_path, follower, leader):
    """A start asked for while a camera reconnects (as after a save that blocked the loop) begins once it streams
    again, instead of an episode discarded at its first frame for a camera that is not lost."""
    camera = synthetic("agentview", False)
    s = EpisodeStore(tmp_path / "ds", "local/test", 30, dataset_features({"agentview": (24, 32, False)}))
    recorder = TeleopRecorder(follower, leader, [camera], s, TASK, 30, Scripted({2: START}), num_episodes=1,
                              episode_time_s=60)

    from ..waiting import wait_until  # here, not above: KILLED_WRITER imports this file as a top-level module

    def wait(condition, what):
        wait_until(condition, 20, what, period_s=0.01)
    try:
        recorder.tick()
        camera.source.unplug(0.5)
        wait(lambda: not camera.connected, "the unplugged camera never read as lost")
        recorder.tick()  # the start
        assert not recorder.recording and recorder.stats.discarded == 0
        wait(lambda: camera.connected, "the camera never came back")
        recorder.tick()
        recorder.tick()
        assert recorder.recording and recorder.stats.discarded == 0 and s.frames >= 1
    finally:
        camera.close()
        s.close()


def test_terminal_keys_read_a_pipe(tmp_path):
    read, write = os.pipe()
    os.write(write, b"x r\nq")
    with os.fdopen(read) as stream, TerminalKeys(stream) as keys:
        assert [keys.poll() for _ in range(4)] == ["toggle", "rerecord", "toggle", "quit"]
    os.close(write)


def test_sgvla_record_two_episodes_against_the_simulated_bus(tmp_path, rig):
    cameras = [{"name": "agentview", "source": "synthetic", "width": 64, "height": 48, "fps": 30, "depth": True,
                "calibration": "agentview"},
               {"name": "wrist", "source": "synthetic", "width": 64, "height": 48, "fps": 30}]
    config = tmp_path / "rig.yaml"
    config.write_text(yaml.safe_dump({
        "follower": {"port": "/dev/ttyACM0", "id": "so101_follower"},
        "leader": {"port": "/dev/ttyACM1", "id": "so101_leader"},
        "cameras": cameras, "control_rate_hz": 30, "safety": {"max_step": 45.0}}))
    # The simulated buses' ports and calibration as key=value overrides of the rig (what `sgvla sim-bus` prints).
    overrides = [f"{arm}.{key}={value}" for arm, port in (("follower", rig.follower.port), ("leader", rig.leader.port))
                 for key, value in (("port", port), ("calibration_dir", rig.calibration_dir))]
    root = tmp_path / "ds"
    proc = subprocess.run([sys.executable, "-m", "sgvla.cli", "record", "--config", str(config), *overrides[:2],
                           "--root", str(root), "--task", TASK, "--episodes", "2", "--episode-time", "1.0",
                           "--reset-time", "0.3", "--auto", *overrides[2:]],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240)
    log = "\n".join(line for line in proc.stderr.splitlines() if not line.startswith(("Svt", "x265", "encoded")))
    assert proc.returncode == 0 and "saved 2 episode(s)" in log, log

    ds = load(root)
    assert ds.num_episodes == 2 and ds.fps == 30
    assert set(ds.meta.camera_keys) == {f"observation.images.{k}" for k in ("agentview", "agentview_depth", "wrist")}
    assert ds.meta.features["action"]["names"] == [f"{j}.pos" for j in JOINTS]
    lengths = [ds.meta.episodes[i]["length"] for i in range(2)]
    assert all(5 <= n <= 31 for n in lengths), lengths  # 1 s at 30 Hz, fewer ticks on a loaded machine
    actions = np.stack([ds.hf_dataset[i]["action"] for i in range(len(ds))])
    states = np.stack([ds.hf_dataset[i]["observation.state"] for i in range(len(ds))])
    # What was commanded is the leader's motion: body joints swing +-20 degrees, the gripper 20..80 %.
    assert np.abs(actions[:, :5]).max() <= 20.5 and np.ptp(actions[:, 0]) > 10
    assert 15 <= actions[:, 5].min() and actions[:, 5].max() <= 85
    # ...and the follower followed it (a few ticks behind).
    for joint in range(5):
        assert max(np.corrcoef(states[k:, joint], actions[:len(actions) - k, joint])[0, 1] for k in range(1, 4)) > 0.8
    # The last command is what the follower's servos hold as their goal.
    last_goal = [rig.follower.register(i + 1, "Goal_Position") for i in range(5)]
    np.testing.assert_allclose(2048 + actions[-1, :5] / DEG_PER_STEP, last_goal, atol=1.5)
    item = ds[len(ds) - 1]
    assert item["observation.images.agentview"].shape == (3, 48, 64) and item["task"] == TASK
    depth = item["observation.images.agentview_depth"]
    assert depth.shape == (1, 48, 64) and 450 < float(depth.min()) and float(depth.max()) < 950
