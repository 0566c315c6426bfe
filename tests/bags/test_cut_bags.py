"""Bags cut short still convert: a twin evaluation whose recorder is SIGKILLed mid-episode, a bag cut at random
offsets (each conversion succeeds with frames that are a prefix of the whole bag's, or refuses in one line), a
folder without metadata.yaml, a sqlite3 bag caught mid-write, and a file that is no bag at all."""

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest
from lerobot.datasets.lerobot_dataset import LeRobotDataset

from sgvla.nodegraph.bag import BagError, BagWriter, open_bag, typestore
from sgvla.nodegraph.bag2dataset import convert
from sgvla.nodegraph.bag_contract import load_contract
from sgvla.nodegraph.mcap_stream import McapStream

from ..waiting import wait_until
from .test_bag2dataset import PLAIN_TOPICS, plain_messages, write_contract
from .test_eval_bag_round_trip import check_frames_are_the_steps, eval_launch

pytestmark = pytest.mark.integration  # converting writes LeRobot datasets; (a) and (e) start processes

ONE_LINE_REFUSALS = ("nothing complete", "not a rosbag2 bag", "ends within MCAP's magic", "have no messages in",
                     "is not in", "before the bag's end")


def plain_contract(tmp_path):
    """plain_so101 with its camera stored as PNG images: frames compare exactly (a video's are lossy)."""
    return load_contract(write_contract(tmp_path, **{"features/observation.images.camera/dtype": "image"}))


def frames(out, repo_id="test/cut"):
    """Every frame's values, episode and index: what 'a prefix of the whole bag's frames' compares."""
    ds = LeRobotDataset(repo_id, root=out)
    return [(int(f["episode_index"]), int(f["frame_index"]), f["observation.state"].numpy(), f["action"].numpy(),
             f["observation.images.camera"].numpy()) for f in (ds[i] for i in range(ds.meta.total_frames))]


def same_frames(got, whole):
    assert len(got) <= len(whole)
    for a, b in zip(got, whole):
        assert a[:2] == b[:2]
        for x, y in zip(a[2:], b[2:]):
            np.testing.assert_array_equal(x, y)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A plain bag written by sgvla's BagWriter (chunks of 0.1 s: several in its 2.7 s), and its dataset."""
    tmp = tmp_path_factory.mktemp("recorded")
    writer = BagWriter(tmp / "bag", chunk_s=0.1)
    for topic, msgtype in PLAIN_TOPICS.items():
        writer.add_topic(topic, msgtype)
    for topic, receive_ns, data in plain_messages("rgb8"):
        writer.write(topic, receive_ns, data)
    writer.close()
    report = convert(tmp / "bag", plain_contract(tmp), tmp / "ds", repo_id="test/cut")
    assert not report.ending and report.frames == 18
    return tmp / "bag", frames(tmp / "ds")


def test_a_bag_cut_at_random_offsets_converts_to_a_prefix_of_its_frames(recorded, tmp_path):
    bag, whole = recorded
    data = (bag / "bag.mcap").read_bytes()
    contract = plain_contract(tmp_path)
    outcomes = []
    for k, offset in enumerate(sorted(random.Random(41).sample(range(len(data)), 6)) + [5, 30]):
        cut = tmp_path / f"cut{k}"
        cut.mkdir()
        (cut / "bag.mcap").write_bytes(data[:offset])  # the recorder never closed it: no metadata.yaml,
        if k % 2:  # or a copy of a whole bag cut short (rosbags' reader: "File end magic is invalid")
            shutil.copy(bag / "metadata.yaml", cut)
        try:
            report = convert(cut, contract, tmp_path / f"ds{k}", repo_id="test/cut")
        except BagError as e:
            assert "\n" not in str(e) and any(r in str(e) for r in ONE_LINE_REFUSALS), str(e)
            outcomes.append((offset, str(e)))
            continue
        got = frames(tmp_path / f"ds{k}")
        same_frames(got, whole)
        assert report.ending and report.episodes[-1].cut, report.table()
        assert re.search(rf"bytes 0-\d+ of {offset}; lost: \d+ byte", report.table()), report.table()
        saved = json.loads((tmp_path / f"ds{k}" / "bag2dataset_report.json").read_text())
        assert saved["ending"] == report.ending and saved["complete_until_ns"] == report.complete_until_ns
        outcomes.append((offset, len(got)))
    print("offset -> frames or refusal:", outcomes)
    assert sum(isinstance(o, int) for _, o in outcomes) >= 3, outcomes  # most cuts convert something


def test_a_cut_zstd_chunk_gives_the_messages_at_its_start(tmp_path):
    """rosbag2's own recorder compresses its chunks (zstd): the start of one cut short decodes as a stream."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.rosbag2.enums import CompressionFormat, CompressionMode

    messages = list(plain_messages("rgb8"))
    writer = Writer(tmp_path / "bag", version=9, storage_plugin=StoragePlugin.MCAP)
    writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
    with writer:
        conns = {t: writer.add_connection(t, m, typestore=typestore()) for t, m in PLAIN_TOPICS.items()}
        for topic, receive_ns, data in messages:
            writer.write(conns[topic], receive_ns, data)
    data = (tmp_path / "bag" / "bag.mcap").read_bytes()
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / "bag.mcap").write_bytes(data[:len(data) // 3])  # inside its one chunk
    bag = open_bag(tmp_path / "cut")
    got = [(topic, t, raw) for topic, _, t, raw in bag.messages()]
    assert 0 < len(got) < len(messages) and got == messages[:len(got)]
    assert bag.cut and f"its first {len(got)} message(s) read" in bag.ending()[-1], bag.ending()


def test_a_folder_without_metadata_converts_whole(recorded, tmp_path):
    """The recorder wrote its MCAP file to the end but not metadata.yaml: nothing lost, every frame converted."""
    bag, whole = recorded
    (tmp_path / "bag").mkdir()
    shutil.copy(bag / "bag.mcap", tmp_path / "bag" / "bag.mcap")
    report = convert(tmp_path / "bag", plain_contract(tmp_path), tmp_path / "ds", repo_id="test/cut")
    same_frames(frames(tmp_path / "ds"), whole)
    assert report.frames == len(whole) and not report.complete_until_ns
    assert "no metadata.yaml" in report.ending[0] and "the file was closed (complete)" in report.ending[1]
    assert "read as a stream, complete" in report.table() and "cut short" not in report.table(), report.table()


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_a_sqlite3_bag_caught_mid_write_converts_what_was_committed(recorded, tmp_path, journal):
    """A rosbag2 sqlite3 writer commits in transactions (rosbag2's cache flushes): copied while one is open (the
    file and its -journal or -wal as they are on disk: a power loss), the bag converts what was committed, and the
    copy read is left as it was."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    _, whole = recorded
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    messages = list(plain_messages("rgb8"))
    with Writer(tmp_path / "bag", version=9, storage_plugin=StoragePlugin.SQLITE3) as writer:
        conn = writer.storage.conn
        conn.execute(f"PRAGMA journal_mode={journal}")
        conn.execute("PRAGMA cache_size=2")  # pages of the open transaction spill into the file (and its journal)
        conns = {t: writer.add_connection(t, m, typestore=typestore()) for t, m in PLAIN_TOPICS.items()}
        for i, (topic, receive_ns, data) in enumerate(messages):
            writer.write(conns[topic], receive_ns, data)
            if i % 12 == 11:
                conn.commit()
            if i == 50:  # 48 committed, 3 pending
                for f in (tmp_path / "bag").iterdir():
                    shutil.copy(f, snapshot / f.name)
    before = {f.name: f.read_bytes() for f in snapshot.iterdir()}
    assert f"bag.db3-{'journal' if journal == 'delete' else 'wal'}" in before, sorted(before)  # no metadata.yaml

    report = convert(snapshot, plain_contract(tmp_path), tmp_path / "ds", repo_id="test/cut")
    got = frames(tmp_path / "ds")
    same_frames(got, whole)
    assert 0 < len(got) < len(whole)
    print("\n".join(report.ending))
    assert "48 complete message(s)" in report.ending[1], report.ending
    assert ("never committed: rolled back" if journal == "delete" else "write-ahead log") in report.ending[1]
    assert {f.name: f.read_bytes() for f in snapshot.iterdir()} == before  # the recording is left as it was


def test_a_file_that_is_no_bag_gets_one_line(tmp_path):
    text = tmp_path / "notes.mcap"
    text.write_text("shopping list: cubes, bowls\n")
    proc = subprocess.run([sys.executable, "-m", "sgvla.cli", "bag2dataset", str(text), "--contract", "plain_so101",
                           "--out", str(tmp_path / "ds")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "notes.mcap is not a rosbag2 bag (neither MCAP nor sqlite3" in proc.stderr, proc.stderr
    assert not (tmp_path / "ds").exists()


def steps_on_disk(mcap):
    """The joint states the recorder has written into the file so far (it writes what it holds once a second)."""
    return sum(1 for _ in McapStream(mcap).messages({"/joint_states"}))


@pytest.mark.slow
def test_a_twin_evaluation_whose_recorder_is_killed_mid_episode_converts(tmp_path, ros_env, ros_domain_id):
    """`sgvla launch so101_eval sim=true record=BAG`; once the recorder has written 20 steps into its file, SIGKILL it
    mid-episode: the MCAP file has no summary, no footer, no metadata.yaml. bag2dataset converts
    the episode up to where the bag ends, frame by frame the bag's own steps, and says where it ends."""
    bag, out, log = tmp_path / "bag", tmp_path / "ds", tmp_path / "launch.log"
    with log.open("w") as f:
        launch = subprocess.Popen(eval_launch(bag, tmp_path, ros_domain_id, 600), env={**ros_env, "MUJOCO_GL": "egl"},
                                  stdout=f, stderr=subprocess.STDOUT)
    try:
        pid = int(wait_until(lambda: re.search(r"bag_recorder \[(\d+)\]", log.read_text()), 120,
                             "the launch's bag_recorder", logs=[log], procs=[launch]).group(1))
        mcap = bag / "bag.mcap"
        wait_until(lambda: mcap.exists() and mcap.stat().st_size > 8 and steps_on_disk(mcap) >= 20, 240, "20 steps in the bag's file", logs=[log],
                   procs=[launch])
        os.kill(pid, signal.SIGKILL)
        assert launch.wait(timeout=120) != 0
    finally:
        if launch.poll() is None:
            launch.send_signal(signal.SIGINT)
            launch.wait(timeout=60)
    text = log.read_text()
    assert "bag_recorder exited first (killed by SIGKILL)" in text, text[-3000:]
    assert not (bag / "metadata.yaml").exists()
    size = mcap.stat().st_size

    proc = subprocess.run([sys.executable, "-m", "sgvla.cli", "bag2dataset", str(bag), "--contract", "so101_eval_sim",
                           "--out", str(out), "--repo-id", "test/killed"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    print(f"bag.mcap: {size} bytes\n" + proc.stdout[-2500:])
    assert "the bag was cut short" in proc.stdout and "cut short: the bag ends in it" in proc.stdout, proc.stdout
    report = json.loads((out / "bag2dataset_report.json").read_text())
    (episode,) = report["episodes"]
    assert episode["saved"] and episode["cut"] and episode["frames"] >= 15, episode
    assert "no metadata.yaml" in report["ending"][0] and f"of {size}; lost:" in report["ending"][1], report["ending"]
    n, states, actions = check_frames_are_the_steps(bag, out, "test/killed")
    assert n == episode["frames"] and n < 600, n
    print(f"{len(states)} joint states, {len(actions)} actions recovered; {n} frames")
