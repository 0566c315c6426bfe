"""benchmarks/gpu_check.py, the prepared check for a session lent a GPU: without CUDA it refuses in one line before
building anything; its dry run takes the same path (a weights-checked policy served to LIBERO workers, the table)
on the CPU with a tiny SmolVLA."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.py"

pytestmark = pytest.mark.integration


def _run(*args: str, timeout: float, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout)


def test_without_cuda_it_refuses_in_one_line():
    done = _run(timeout=120, env={"CUDA_VISIBLE_DEVICES": ""})  # no GPU, also on a machine that has one
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("gpu_check: no CUDA device here"), done.stderr


@pytest.mark.sim
@pytest.mark.slow
def test_the_dry_run_serves_a_checked_policy_to_workers_and_prints_the_table():
    done = _run("--dry-run", "--workers", "1,2", "--max-steps", "2", timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| 1 |") or line.startswith("| 2 |")]
    assert len(rows) == 2, done.stdout
    for line, workers in zip(rows, (1, 2)):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[0] == str(workers) and cells[1] == str(workers) and cells[6] == "6,700", line
        assert float(cells[3].replace(",", "")) > 0, line
