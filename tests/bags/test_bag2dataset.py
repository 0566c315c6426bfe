"""`sgvla bag2dataset`: the alignment rule (no frame sees a later message; late and missing ticks counted), contracts
checked when they load and when the bag opens, and bags written from scratch by `rosbags` (sqlite3 and MCAP, sensor_msgs
only, no sgvla message) converted with config/contracts/plain_so101.yaml and read back by LeRobotDataset."""

import json
import subprocess
import sys

import numpy as np
import pytest
import yaml
from lerobot.datasets.lerobot_dataset import LeRobotDataset

from sgvla.core.config import ConfigError
from sgvla.nodegraph.bag import typestore
from sgvla.nodegraph.bag2dataset import NS, BagError, FeatureStats, align, convert, ticks
from sgvla.nodegraph.bag_contract import load_contract
from sgvla.paths import REPO_ROOT

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
FPS = 30
WIDTH, HEIGHT = 64, 48


# -- (a) the alignment rule ------------------------------------------------------------------------------------------

def test_ticks_are_exact_nanoseconds_from_the_start():
    assert ticks(5, 5 + NS, 10) == [5 + k * NS // 10 for k in range(11)]
    assert ticks(0, NS - 1, 3) == [0, NS // 3, 2 * NS // 3]  # the end is inclusive, never passed
    assert ticks(10, 9, 30) == []


def test_a_message_just_after_a_tick_lands_in_the_next_frame_one_at_the_tick_in_that_frame():
    period = NS // 10  # 10 fps
    eps = 1  # one nanosecond
    times = {
        # at tick 0 exactly; just after tick 1 (so tick 1 still shows message 0); at tick 3 exactly
        "a": [0, period + eps, 3 * period],
        # just after tick 0: ticks 0 waits for it (skipped), tick 1 shows it
        "b": [eps, 2 * period, 3 * period + eps, 4 * period],
    }
    stats = {n: FeatureStats() for n in times}
    frames, waiting, dropped = align(times, ticks(0, 4 * period, 10), {"a": 2 * period, "b": 2 * period}, stats)
    assert waiting == 1 and dropped == 0  # tick 0: "b" had no message yet
    assert [f.time_ns for f in frames] == [period, 2 * period, 3 * period, 4 * period]
    assert [f.picks["a"] for f in frames] == [0, 1, 2, 2]  # message 1 (tick 1 + 1 ns) first shows at tick 2
    assert [f.picks["b"] for f in frames] == [0, 1, 1, 3]  # message 2 (tick 3 + 1 ns) is never anyone's: 3 is newer
    assert stats["b"].missing == 1 and stats["a"].missing == 0
    assert stats["a"].filled == 4 and stats["a"].late == 0
    assert stats["a"].max_age_s == pytest.approx(period / NS)  # ticks 1 and 4 show a message one tick old


def test_late_ticks_are_counted_and_dropped_or_kept():
    period = NS // 10
    times = {"a": [0, period, 2 * period, 3 * period, 4 * period, 5 * period], "b": [0, 3 * period + 1]}
    limit = {"a": 2 * period, "b": 2 * period}  # b's message 0 is late from tick 3 on (3 ticks old)

    stats = {n: FeatureStats() for n in times}
    frames, waiting, dropped = align(times, ticks(0, 5 * period, 10), limit, stats, late="drop")
    assert waiting == 0 and dropped == 1
    assert [f.time_ns // period for f in frames] == [0, 1, 2, 4, 5]  # tick 3: b is 3 ticks old (its next is 1 ns on)
    assert stats["b"].late == 1 and stats["b"].filled == 5 and stats["a"].filled == 5
    assert stats["b"].max_age_s == pytest.approx(2 * period / NS)  # dropped frames' ages are not what was written

    stats = {n: FeatureStats() for n in times}
    frames, waiting, dropped = align(times, ticks(0, 5 * period, 10), limit, stats, late="keep")
    assert dropped == 0 and len(frames) == 6 and frames[3].late == ["b"] and frames[3].picks["b"] == 0
    assert stats["b"].late == 1 and stats["b"].filled == 5 and stats["b"].max_age_s == pytest.approx(0.3)


# -- contracts -------------------------------------------------------------------------------------------------------

def write_contract(tmp_path, **changes):
    data = yaml.safe_load((REPO_ROOT / "config/contracts/plain_so101.yaml").read_text())
    for dotted, value in changes.items():
        node = data
        *parents, leaf = dotted.split("/")
        for p in parents:
            node = node[p]
        if value is None:
            del node[leaf]
        else:
            node[leaf] = value
    path = tmp_path / "contract.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(("change", "error"), [
    ({"fsp": 30}, "unknown key(s) fsp"),
    ({"features/action/topik": "/x"}, "features.action: unknown key(s) topik"),
    ({"features/action/topic": None}, "features.action: missing key(s) topic"),
    ({"features/action/field": "positions"}, "features.action.field: sensor_msgs/msg/JointState has no field "
                                             "'positions'"),
    ({"features/action/type": "sensor_msgs/msg/Imag"}, "features.action.type: unknown message type"),
    ({"features/observation.images.camera/field": "data"}, "features.observation.images.camera: an image feature "
                                                           "takes no field"),
    ({"task/text": None}, "task: give `text`"),
    ({"episodes/by": "topic"}, "episodes.topic: episodes by topic need the topic"),
])
def test_a_bad_contract_is_refused_naming_the_file_and_the_key(tmp_path, change, error):
    path = write_contract(tmp_path, **change)
    with pytest.raises(ConfigError) as e:
        load_contract(path)
    assert str(path) in str(e.value) and error in str(e.value), str(e.value)


def test_a_contract_name_resolves_to_config_contracts():
    for name in ("plain_so101", "hardware", "so101_eval", "so101_eval_sim"):
        assert load_contract(name).source.endswith(f"config/contracts/{name}.yaml")
    with pytest.raises(ConfigError, match="shipped contracts: .*hardware"):
        load_contract("hardwear")


# -- (b) bags written from scratch -----------------------------------------------------------------------------------

def stamp_of(store, t_ns):
    Time, Header = store.types["builtin_interfaces/msg/Time"], store.types["std_msgs/msg/Header"]
    return Header(stamp=Time(sec=t_ns // NS, nanosec=t_ns % NS), frame_id="")


def joint_state(store, t_ns, positions, names=JOINTS):
    JointState = store.types["sensor_msgs/msg/JointState"]
    return JointState(header=stamp_of(store, t_ns), name=list(names), position=np.asarray(positions, np.float64),
                      velocity=np.zeros(0), effort=np.zeros(0))


def image(store, t_ns, rgb, encoding):
    Image = store.types["sensor_msgs/msg/Image"]
    pixels = np.zeros((HEIGHT, WIDTH, 3), np.uint8)
    pixels[:] = rgb[::-1] if encoding == "bgr8" else rgb
    return Image(header=stamp_of(store, t_ns), height=HEIGHT, width=WIDTH, encoding=encoding, is_bigendian=0,
                 step=WIDTH * 3, data=pixels.ravel())


def state_of(k):
    return [0.01 * k + j for j in range(6)]


def command_of(k):
    return [-0.02 * k - j for j in range(6)]


def color_of(k):
    return np.array([20 + 20 * (k % BURST), 60 + 120 * (k // BURST), 90], np.uint8)


T0 = 1_700_000_000 * NS  # a wall-clock-like start
BURST = 10  # messages per topic and burst; two bursts 2 s apart: two episodes by gap


def burst_start(b):
    return T0 + b * 2 * NS + b * BURST * NS // FPS


PLAIN_TOPICS = {"/joint_states": "sensor_msgs/msg/JointState", "/joint_commands": "sensor_msgs/msg/JointState",
                "/camera/image_raw": "sensor_msgs/msg/Image", "/rosout_like": "std_msgs/msg/String"}


def plain_messages(encoding):
    """(topic, receive time, CDR) of a plain bag: /joint_states at each tick exactly (names in reverse order),
    /joint_commands 1 ns after each tick, the camera at each tick; every message received 5 ms after its stamp.
    Values encode (burst, index)."""
    store = typestore()
    for b in range(2):
        for k in range(BURST):
            t = burst_start(b) + k * NS // FPS
            n = b * BURST + k
            msgs = [("/joint_states", t, joint_state(store, t, state_of(n)[::-1], JOINTS[::-1])),
                    ("/joint_commands", t + 1, joint_state(store, t + 1, command_of(n))),
                    ("/camera/image_raw", t, image(store, t, color_of(n), encoding))]
            for topic, stamp, msg in msgs:
                yield topic, stamp + 5_000_000, store.serialize_cdr(msg, msg.__msgtype__)
    String = store.types["std_msgs/msg/String"]
    yield "/rosout_like", T0, store.serialize_cdr(String(data="unused"), "std_msgs/msg/String")


def write_plain_bag(path, storage, encoding):
    """`plain_messages` written by rosbags (sqlite3 or MCAP)."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    store = typestore()
    plugin = {"sqlite3": StoragePlugin.SQLITE3, "mcap": StoragePlugin.MCAP}[storage]
    with Writer(path, version=9, storage_plugin=plugin) as writer:
        conns = {t: writer.add_connection(t, m, typestore=store) for t, m in PLAIN_TOPICS.items()}
        for topic, receive_ns, data in plain_messages(encoding):
            writer.write(conns[topic], receive_ns, data)


@pytest.mark.parametrize(("storage", "encoding"), [("sqlite3", "rgb8"), ("mcap", "bgr8")])
def test_a_plain_sensor_msgs_bag_becomes_a_lerobot_dataset(tmp_path, storage, encoding):
    bag = tmp_path / "bag"
    write_plain_bag(bag, storage, encoding)
    out = tmp_path / "ds"
    proc = subprocess.run([sys.executable, "-m", "sgvla.cli", "bag2dataset", str(bag), "--contract", "plain_so101",
                           "--out", str(out), "--repo-id", "test/plain", "task.text=stack the cubes"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    assert "observation.state" in log and "2 episode(s) saved of 2" in log, log[-3000:]

    report = json.loads((out / "bag2dataset_report.json").read_text())
    # Tick 0 of burst 0: no command yet (it comes 1 ns later): skipped. Tick 0 of burst 1: the newest command is 2 s
    # old, past the action's 15 ticks: late, dropped. Every other tick has each feature's message of its own tick, or
    # (the commands) the one 1 ns after the tick before.
    assert [e["frames"] for e in report["episodes"]] == [BURST - 1, BURST - 1]
    assert [e["skipped_waiting"] for e in report["episodes"]] == [1, 0]
    assert [e["dropped_late"] for e in report["episodes"]] == [0, 1]
    action = report["features"]["action"]
    assert (action["messages"], action["missing"], action["late"]) == (2 * BURST, 1, 1)
    assert action["max_age_s"] == pytest.approx(1 / FPS, abs=1e-8)
    assert report["features"]["observation.state"]["max_age_s"] == 0.0

    ds = LeRobotDataset("test/plain", root=out)
    assert ds.meta.total_episodes == 2 and ds.meta.total_frames == 2 * (BURST - 1) and ds.meta.fps == FPS
    assert ds.meta.robot_type == "so101_follower"
    assert ds.meta.features["observation.state"]["names"] == JOINTS
    for i in range(ds.meta.total_frames):
        frame = ds[i]
        b, k = divmod(i, BURST - 1)
        k += 1  # each episode's first tick is not a frame
        n = b * BURST + k
        assert frame["task"] == "stack the cubes" and int(frame["episode_index"]) == b
        np.testing.assert_allclose(frame["observation.state"].numpy(), state_of(n), atol=1e-5)  # ordered by name
        np.testing.assert_allclose(frame["action"].numpy(), command_of(n - 1), atol=1e-5)  # never the tick's own
        rgb = frame["observation.images.camera"].numpy().mean(axis=(1, 2)) * 255
        np.testing.assert_allclose(rgb, color_of(n), atol=6)  # lossy video; bgr8 read as RGB


def test_a_bag_that_does_not_fit_the_contract_is_refused_before_writing(tmp_path):
    bag = tmp_path / "bag"
    write_plain_bag(bag, "mcap", "rgb8")
    path = write_contract(tmp_path, **{"features/action/topic": "/leader/joint_states"})
    with pytest.raises(BagError, match=r"features.action.topic: /leader/joint_states is not in .*/joint_commands"):
        convert(bag, load_contract(path), tmp_path / "ds")
    path = write_contract(tmp_path, **{"features/action/topic": "/camera/image_raw"})
    with pytest.raises(BagError, match="features.action.type: /camera/image_raw is sensor_msgs/msg/Image in"):
        convert(bag, load_contract(path), tmp_path / "ds")
    assert not (tmp_path / "ds").exists()
    (tmp_path / "taken").mkdir()
    with pytest.raises(FileExistsError, match="taken exists"):
        convert(bag, load_contract("plain_so101"), tmp_path / "taken")


# The topics arm_policy's runs are recorded with (the so101_eval contract's).
ARM_TOPICS = {"/joint_states": "sensor_msgs/msg/JointState", "/joint_commands": "sensor_msgs/msg/JointState",
              "/agentview/image_raw": "sensor_msgs/msg/Image", "/wrist/image_raw": "sensor_msgs/msg/Image",
              "/task": "std_msgs/msg/String"}


def test_the_so101_eval_contract_makes_one_episode_per_evaluation_episode(tmp_path):
    """A bag as `sgvla launch so101_eval record=...` records on the arm: the operator's lines on /eval/operator open
    (`running episode N`) and close (`verdict episode N`) the episodes; the task is arm_policy's /task text; the
    joints become LeRobot units (degrees, gripper 0..100 %)."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    from sgvla.so101.hardware.joints import from_radians

    store = typestore()
    String = store.types["std_msgs/msg/String"]
    bag = tmp_path / "bag"
    with Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        topics = {**ARM_TOPICS, "/eval/operator": "std_msgs/msg/String"}
        conns = {t: writer.add_connection(t, m, typestore=store) for t, m in topics.items()}

        def text(topic, t, data):
            writer.write(conns[topic], t, store.serialize_cdr(String(data=data), "std_msgs/msg/String"))

        # 60 ticks of data; episode 0 runs over ticks 10..20, episode 1 over ticks 35..50 (its task changes).
        text("/eval/operator", T0 + 2 * NS // FPS, "confirm episode 0: task ... -- set the scene, then start")
        text("/task", T0 + 9 * NS // FPS, "put the bowl on the stove")
        for k in range(60):
            t = T0 + k * NS // FPS  # on the tick grid (in whole nanoseconds, as the converter's ticks)
            if k == 10:
                text("/eval/operator", t, "running episode 0 (stop: publish stop on eval/confirm)")
            if k == 20:
                text("/eval/operator", t, "verdict episode 0: 10 steps (time limit); publish success|failure")
            if k == 34:
                text("/task", t, "put the bowl on the plate")
            if k == 35:
                text("/eval/operator", t, "running episode 1 (stop: publish stop on eval/confirm)")
            if k == 50:
                text("/eval/operator", t, "verdict episode 1: 15 steps (operator)")
            msgs = [("/joint_states", joint_state(store, t, [0.01 * k] * 6)),
                    ("/joint_commands", joint_state(store, t, [0.02 * k] * 6)),
                    ("/agentview/image_raw", image(store, t, color_of(k % 20), "rgb8")),
                    ("/wrist/image_raw", image(store, t, color_of(k % 20), "rgb8"))]
            for topic, msg in msgs:
                writer.write(conns[topic], t + 1_000_000, store.serialize_cdr(msg, msg.__msgtype__))
    out = tmp_path / "ds"
    report = convert(bag, load_contract("so101_eval"), out, repo_id="test/eval")
    assert [(e.ticks, e.frames, e.skipped_waiting) for e in report.episodes] == [(11, 11, 0), (16, 16, 0)]
    ds = LeRobotDataset("test/eval", root=out)
    assert ds.meta.total_episodes == 2 and ds.meta.total_frames == 27
    assert ds.meta.features["action"]["names"] == [f"{j}.pos" for j in JOINTS]
    first, last = ds[0], ds[26]
    assert first["task"] == "put the bowl on the stove" and last["task"] == "put the bowl on the plate"
    expected = from_radians(JOINTS, [0.01 * 10] * 6)
    np.testing.assert_allclose(first["observation.state"].numpy(), [expected[j] for j in JOINTS], rtol=1e-5)
    expected = from_radians(JOINTS, [0.02 * 50] * 6)
    np.testing.assert_allclose(last["action"].numpy(), [expected[j] for j in JOINTS], rtol=1e-5)


def test_a_tolerance_takes_stamps_rounded_past_a_tick_as_at_it():
    """Simulated time stamps steps x period rounded to the nanosecond: step 2 of a 30 Hz run is 66666667 ns, a
    nanosecond past tick 2 (66666666). With tick_tolerance_ns it is the tick's; without, strictly the next one's."""
    steps = [round(k * NS / 30) for k in range(5)]
    stats = {"a": FeatureStats()}
    frames, _, _ = align({"a": steps}, ticks(0, steps[-1], 30), {"a": NS}, stats, tolerance_ns=1000)
    assert [f.picks["a"] for f in frames] == [0, 1, 2, 3, 4] and stats["a"].max_age_s == 0.0
    strict, _, _ = align({"a": steps}, ticks(0, steps[-1], 30), {"a": NS}, {"a": FeatureStats()})
    assert [f.picks["a"] for f in strict] == [0, 1, 1, 3, 4]  # tick 2 still shows step 1: step 2 came 1 ns after


def test_ticks_waiting_for_the_task_are_not_counted_in_the_features(tmp_path):
    """A task text that comes after the data: the ticks before it are skipped like those before a feature's first
    message, so each feature's filled + late counts the frames written. (A late joint state at such a tick was
    counted: 26 late reported, 25 late frames in a round trip's dataset.)"""
    from rosbags.rosbag2 import StoragePlugin, Writer

    store = typestore()
    String = store.types["std_msgs/msg/String"]
    bag = tmp_path / "bag"
    with Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conns = {t: writer.add_connection(t, m, typestore=store) for t, m in ARM_TOPICS.items()}
        writer.write(conns["/task"], T0 + 9 * NS // FPS, store.serialize_cdr(String(data="put the bowl on the stove"),
                                                                         "std_msgs/msg/String"))
        for k in range(30):
            t = T0 + k * NS // FPS
            msgs = [("/joint_commands", joint_state(store, t, [0.02 * k] * 6)),
                    ("/agentview/image_raw", image(store, t, color_of(k % 20), "rgb8")),
                    ("/wrist/image_raw", image(store, t, color_of(k % 20), "rgb8"))]
            if not 3 <= k <= 6 and not 20 <= k <= 23:  # the arm silent twice: late joint states before and after
                msgs.append(("/joint_states", joint_state(store, t, [0.01 * k] * 6)))
            for topic, msg in msgs:
                writer.write(conns[topic], t, store.serialize_cdr(msg, msg.__msgtype__))
    report = convert(bag, load_contract("so101_eval", {"episodes.by": "bag", "late": "keep"}), tmp_path / "ds",
                     repo_id="test/late")
    (episode,) = report.episodes
    assert episode.skipped_waiting == 9 and episode.frames == episode.ticks - 9, episode
    state = report.features["observation.state"]
    # late: ticks 21-23 of the second silence (at tick 21 the newest, of tick 19, is 66666667 ns old: over the
    # 2-tick limit of 66666666 ns); none of the first silence, which is before the task
    assert state.late == 3 and state.filled + state.late == episode.frames, state
    assert all(f.filled + f.late == episode.frames for f in report.features.values()), report.features
