"""What a recording prints: no video encoder banners (SVT-AV1's and x265's ~60 lines per saved episode), with the
dataset's persisted encoder settings exactly LeRobot's; and a recorder's key hint only where it reads keys."""

import json
import subprocess
import sys
import textwrap

import pytest

from sgvla.so101.hardware.recording import HELP, TOPIC_HELP, operator_help

SAVE_ONE_EPISODE = textwrap.dedent("""
    import sys
    import numpy as np
    from sgvla.so101.hardware.recording import EpisodeStore, dataset_features
    store = EpisodeStore(sys.argv[1], "local/quiet", 30, dataset_features({"agentview": (24, 32, True)}),
                         image_writer_threads=1)
    for i in range(3):
        store.add({"observation.state": np.full(6, i, np.float32), "action": np.full(6, i, np.float32), "task": "t",
                   "observation.images.agentview": np.full((24, 32, 3), 10 * i, np.uint8),
                   "observation.images.agentview_depth": np.full((24, 32, 1), 700 + i, np.uint16)})
    store.commit()
    store.close()
    print("saved")
""")


@pytest.mark.integration
def test_saving_an_episode_prints_no_encoder_banner(tmp_path):
    """In a process of its own: SVT-AV1 reads its log level once per process."""
    root = tmp_path / "ds"
    done = subprocess.run([sys.executable, "-c", SAVE_ONE_EPISODE, str(root)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and "saved" in done.stdout, done.stdout + done.stderr
    for banner in ("Svt[info]", "x265 [info]", "HEVC encoder version", "SVT-AV1 Encoder Lib", "encoded 3 frames"):
        assert banner not in done.stderr, done.stderr
    features = json.loads((root / "meta" / "info.json").read_text())["features"]
    # LeRobot's own encoder settings are what the dataset records (the quiet log level is not a setting of it)
    assert features["observation.images.agentview_depth"]["info"]["video.extra_options"] == {"x265-params": "lossless=1"}
    assert features["observation.images.agentview"]["info"]["video.extra_options"] == {}

    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    dataset = LeRobotDataset("local/quiet", root=root, video_backend="pyav")
    assert dataset.num_frames == 3
    assert tuple(dataset[2]["observation.images.agentview_depth"].shape)[-2:] == (24, 32)  # the depth decodes


def test_the_key_hint_only_where_keys_are_read():
    assert operator_help(True).startswith(HELP) and TOPIC_HELP in operator_help(True)
    under_launch = operator_help(False)
    assert "keys:" not in under_launch and "space" not in under_launch
    assert under_launch == "commands on record_control (std_msgs/String): start, save, toggle, rerecord, abort, quit"
