"""The ten LIBERO-Spatial tasks, in LIBERO's order (the task ids of the paper's Table 7), read from LIBERO's files.

LIBERO's benchmark (``libero.libero.benchmark``) lists the tasks, but its package imports torch at its top (for
``torch.load`` of the initial states), and a simulator worker must not hold torch (about 1 GiB) to step MuJoCo. So
the task list is read here from the benchmark's data file, ``benchmark/libero_suite_task_map.py`` (a literal: suite
name -> task names, parsed, not imported), with what the benchmark's ``Task`` derives from each name: the language
(the name with spaces), the BDDL file and the initial-states file (``sgvla.libero.init_states`` reads it without
torch). LIBERO-Spatial's task order is LIBERO's order index 0, the file's own order.
``tests/sim/test_libero_tasks.py`` holds this equal to LIBERO's benchmark.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from sgvla.libero.bddl import BddlProblem
from sgvla.libero.setup import libero_package_root, prepare_libero

SUITE = "libero_spatial"
MAX_STEPS = 280  # LeRobot's step limit for the suite (TASK_SUITE_MAX_STEPS; its longest training demo: 193 steps)


@dataclass(frozen=True)
class TaskInfo:
    """``language`` is the prompt LeRobot gives policies (LIBERO's task name with spaces)."""

    task_id: int
    name: str
    language: str
    bddl_file: Path
    init_states_file: Path

    @property
    def problem(self) -> BddlProblem:
        return _problem(self.bddl_file)


@cache
def _problem(path: Path) -> BddlProblem:
    return BddlProblem.read(path)


TASK_MAP_FILE = Path("benchmark") / "libero_suite_task_map.py"  # under libero/libero


@cache
def task_names() -> tuple[str, ...]:
    """LIBERO-Spatial's task names in LIBERO's order, from the benchmark's task map file (see the module docstring)."""
    path = libero_package_root() / TASK_MAP_FILE
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "libero_task_map" for t in node.targets):
            return tuple(ast.literal_eval(node.value)[SUITE])
    raise RuntimeError(f"{path} defines no libero_task_map: this LIBERO is not the one sgvla reads")


@cache
def _folders() -> tuple[Path, Path]:
    """LIBERO's BDDL and initial-states folders, as its config file names them."""
    prepare_libero()
    from libero.libero import get_libero_path

    return Path(get_libero_path("bddl_files")), Path(get_libero_path("init_states"))


def num_tasks() -> int:
    return len(task_names())


def task_info(task_id: int) -> TaskInfo:
    names = task_names()
    if not isinstance(task_id, int) or not 0 <= task_id < len(names):
        raise ValueError(f"unknown {SUITE} task id {task_id!r}: valid ids are 0..{len(names) - 1}")
    name = names[task_id]
    bddl_root, init_root = _folders()
    return TaskInfo(task_id, name, name.replace("_", " "), bddl_root / SUITE / f"{name}.bddl",
                    init_root / SUITE / f"{name}.pruned_init")
