"""``sgvla record`` teleoperates the SO101 follower from the leader arm and records a LeRobot dataset.

Talks to the arms and cameras directly (no ROS), through LeRobot's SO101Follower/SO101Leader with
sgvla's safety layer. Keys in the terminal: space/enter start or save an episode, r re-records,
a aborts, q quits; an unsaved episode is never written. Without a terminal on stdin (a script, a service)
there are no keys: pass --auto, or record over ROS 2 and send the commands on the record_control topic.

With ``--config twin`` (a rig whose follower port is ``twin``) the follower is the SO101 MuJoCo twin: it runs
here in real time, its servos answer on a pseudo-terminal as a Feetech bus (from a process of their own, as every
simulated bus), and the same SO101Follower and recording loop drive it; ``source: twin`` cameras render from it.
``--sim-leader`` replaces the leader arm by a simulated one whose joints swing by themselves (as ``sgvla
sim-bus``'s), for runs without any arm.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from contextlib import ExitStack
from pathlib import Path

from sgvla.cli.arguments import add_overrides_argument, add_settings, settings_from
from sgvla.core.config import ConfigError, parse_items
from sgvla.so101.recording import RecordingSettings

log = logging.getLogger("sgvla.record")


def add_parser(sub) -> None:
    p = sub.add_parser("record", help="Teleoperated recording of SO101 episodes into a LeRobot dataset.",
                       description=__doc__)
    p.add_argument("--config", default="so101", help="Rig config: a name in config/hardware/ or a YAML path.")
    add_overrides_argument(p, "overrides of the rig config", "follower.port=/dev/ttyACM0 cameras=[]")
    add_settings(p, RecordingSettings)  # --root, --task, --episodes, --auto, ...: the recorder nodes' parameters
    p.add_argument("--sim-leader", action="store_true", help="A simulated leader that moves by itself instead of "
                                                             "the rig's leader arm.")
    p.add_argument("--task-id", type=int, default=0, help="On the twin, the task of config/twin/so101_tabletop.yaml.")
    p.add_argument("--seed", type=int, default=0, help="On the twin, the seed of the scene reset.")
    p.set_defaults(func=run)


def simulated_arms(stack: ExitStack, rig, sim_leader: bool, task_id: int, seed: int):
    """Point the rig at the twin (follower port ``twin``) and at a simulated leader (``--sim-leader``), served
    for the session; returns the twin's rig (None without the twin)."""
    import tempfile

    from sgvla.so101.hardware.calibration import write_arm_calibration
    from sgvla.so101.hardware.sim_bus import LEADER_MOTION, SimFeetechBus, sim_calibration
    from sgvla.so101.twin.bus import TWIN_PORT, serve_twin

    twin = None
    if rig.follower.port == TWIN_PORT:
        twin = stack.enter_context(serve_twin(task_id, seed, arm_id=rig.follower.id))
        rig.follower.port, rig.follower.calibration_dir = twin.bus.port, str(twin.calibration_dir)
    if sim_leader:
        leader = stack.enter_context(SimFeetechBus(motion=LEADER_MOTION))
        folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="sgvla_leader_"))
        write_arm_calibration(f"{folder}/{rig.leader.id}.json", sim_calibration())
        rig.leader.port, rig.leader.calibration_dir = leader.port, folder
    return twin


NO_TERMINAL = ("stdin is not a terminal, so no key press can start or save an episode; pass --auto (episodes start "
               "and end by themselves, --episode-time and --reset-time apart), or record over ROS 2: `sgvla launch "
               "hardware record=DIR task=...` takes start/save/rerecord/abort/quit on its record_control topic")


def root_problem(root: Path) -> str:
    """Why `root` cannot be a dataset folder (a file, or under one), or ""."""
    for path in (root, *root.parents):
        if path.exists():
            if path.is_dir():
                return ""
            return f"--root {root}: {path} is a file; name a folder (created, or appended to)"
    return ""


def run(args: argparse.Namespace) -> int:
    # Refused before anything is loaded or connected: keys that cannot come, a dataset folder that cannot be one.
    rec = settings_from(args, RecordingSettings)
    problem = "" if rec.auto_start or sys.stdin.isatty() else NO_TERMINAL
    problem = problem or root_problem(Path(rec.root).expanduser())
    if problem:
        print(f"sgvla record: {problem}", file=sys.stderr)
        return 2
    # LeRobot (and with it torch) loads only when recording, so `sgvla --help` stays fast.
    from sgvla.so101.hardware.arm import ArmError, FollowerArm, LeaderArm
    from sgvla.so101.hardware.calibration import CalibrationError
    from sgvla.so101.hardware.cameras import Camera, CameraError, make_source
    from sgvla.so101.hardware.config import load_hardware_config
    from sgvla.so101.hardware.recording import (
        HELP,
        EpisodeStore,
        RecordingError,
        TeleopRecorder,
        TerminalKeys,
        dataset_features,
    )

    logging.basicConfig(level=logging.INFO, format="%(message)s", force=True)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # local datasets only
    try:
        rig = load_hardware_config(args.config, parse_items(args.overrides))
    except ConfigError as e:
        log.error("%s", e)
        return 2
    fps = round(rig.control_rate_hz)
    features = dataset_features({c.name: (c.height, c.width, c.depth) for c in rig.cameras})
    with ExitStack() as stack:
        try:
            twin = simulated_arms(stack, rig, args.sim_leader, args.task_id, args.seed)
            task = rec.task or (twin.twin.task if twin else "")
            if not task:
                raise RecordingError("--task: the task string of the episodes is required")
            follower = FollowerArm(rig.follower, rig.safety)
            leader = LeaderArm(rig.leader)
            follower.connect()
            stack.callback(follower.close)
            leader.connect()
            stack.callback(leader.close)
            cameras = []
            for config in rig.cameras:
                source = make_source(config, twin.twin if twin else None)
                cameras.append(Camera(config, source).start())
                stack.callback(cameras[-1].close)
            store = EpisodeStore(Path(rec.root), rec.repo_id, fps, features)
            stack.callback(store.close)
            keys = stack.enter_context(TerminalKeys())
            log.info("%s\nrecording %d episode(s) of %r into %s (%d already there)", HELP, rec.episodes, task,
                     rec.root, store.episodes)
            stats = TeleopRecorder(follower, leader, cameras, store, task, fps, keys, rec.episodes,
                                   rec.episode_time_s, rec.reset_time_s, rec.auto_start).run()
            total = store.episodes
        except (ArmError, CalibrationError, CameraError, RecordingError, OSError) as e:  # OSError: the dataset folder
            log.error("record: %s", e)
            return 1
    log.info("saved %d episode(s), %d frames (%d recorded twice: the loop was late); discarded %d; dataset %s has "
             "%d episode(s)", stats.saved, stats.frames, sum(stats.filled), stats.discarded, rec.root, total)
    return 0
