"""The settings of a teleoperated recording session into a LeRobot dataset, declared once.

From these fields come `sgvla record`'s flags (`sgvla.cli.record`), the hardware launch's recording arguments
(`sgvla.launch.hardware`; its ``record`` argument is the ``root``), the parameters the recorder nodes declare
(``dataset_recorder``, ``teleop_recorder``: with ranges from the minimums), ``teleop_record.launch.py``'s arguments,
and the defaults ``config/ros/hardware.yaml`` repeats with these help texts as its comments (a test holds them
equal). A light module: no LeRobot, no ROS.
"""

from __future__ import annotations

from dataclasses import dataclass

from sgvla.core.settings import check, setting


@dataclass(frozen=True)
class RecordingSettings:
    root: str = setting("", "dataset folder (created, or appended to); required", required=True)
    repo_id: str = setting("local/so101_bowls", "dataset name stored in its metadata (never pushed)")
    task: str = setting("", "task string of every episode, e.g. 'put the bowl on the stove'; empty: the twin's task "
                            "prompt (required on the arm)")
    episodes: int = setting(1, "episodes to save; the recording ends after them", minimum=1)
    episode_time_s: float = setting(60.0, "seconds after which an episode is saved", minimum=0.1,
                                    flag="--episode-time")
    reset_time_s: float = setting(10.0, "seconds between episodes when they start by themselves (auto_start)", minimum=0.0,
                                  flag="--reset-time")
    auto_start: bool = setting(False, "start episodes without a key press or a record_control start", flag="--auto")

    def __post_init__(self):
        check(self)
