"""The ten LIBERO-Spatial tasks, in LIBERO's order (the task ids of the paper's Table 7)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from sgvla.libero.bddl import BddlProblem
from sgvla.libero.setup import prepare_libero

SUITE = "libero_spatial"


@dataclass(frozen=True)
class TaskInfo:
    """``language`` is the prompt LeRobot gives policies (LIBERO's task name with spaces)."""

    task_id: int
    name: str
    language: str
    bddl_file: Path

    @property
    def problem(self) -> BddlProblem:
        return _problem(self.bddl_file)


@cache
def _problem(path: Path) -> BddlProblem:
    return BddlProblem.read(path)


TASK_ORDER_LINE = "[info] using task orders"  # LIBERO's benchmark prints it (stdout) whenever one is made


@cache
def _suite():
    """LIBERO's benchmark of the suite and its BDDL folder. The benchmark's constructor prints its task order, which
    for sgvla is always LIBERO's own (order index 0: the ids above): a line every process of a run repeats (the
    main one and each worker) and that tells nothing the task ids do not. It is left out; anything else the
    constructor prints passes."""
    import contextlib
    import io
    import sys

    prepare_libero()
    from libero.libero import benchmark, get_libero_path

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        suite = benchmark.get_benchmark_dict()[SUITE]()
    other = [line for line in printed.getvalue().splitlines() if not line.startswith(TASK_ORDER_LINE)]
    if other:
        print("\n".join(other), file=sys.stdout)
    return suite, Path(get_libero_path("bddl_files"))


def num_tasks() -> int:
    return len(_suite()[0].tasks)


def task_info(task_id: int) -> TaskInfo:
    suite, bddl_root = _suite()
    if not isinstance(task_id, int) or not 0 <= task_id < len(suite.tasks):
        raise ValueError(f"unknown {SUITE} task id {task_id!r}: valid ids are 0..{len(suite.tasks) - 1}")
    task = suite.get_task(task_id)
    return TaskInfo(task_id, task.name, task.language, bddl_root / task.problem_folder / task.bddl_file)


def libero_suite():
    """LIBERO's benchmark object for the suite (what LeRobot's ``LiberoEnv`` takes)."""
    return _suite()[0]
