"""sgvla reads LIBERO-Spatial's task list and initial states from LIBERO's files, without LIBERO's benchmark module
or torch (both would load torch into every simulator worker): the same tasks, in the same order, as LIBERO's
benchmark gives, and the same initial states, bit for bit, as `torch.load` gives; a file that is not a numpy array
in torch's zip format is refused, naming the file."""

import contextlib
import io
import zipfile

import numpy as np
import pytest

from sgvla.libero.init_states import InitStatesError, read_init_states
from sgvla.libero.tasks import SUITE, num_tasks, task_info

pytestmark = pytest.mark.sim


@pytest.fixture(scope="module")
def libero_benchmark():
    from libero.libero import benchmark, get_libero_path

    with contextlib.redirect_stdout(io.StringIO()):  # it prints its task order
        suite = benchmark.get_benchmark_dict()[SUITE]()
    return suite, get_libero_path


def test_the_tasks_are_libero_benchmarks(libero_benchmark):
    suite, get_libero_path = libero_benchmark
    assert num_tasks() == suite.get_num_tasks() == 10
    for task_id in range(num_tasks()):
        ours, theirs = task_info(task_id), suite.get_task(task_id)
        assert (ours.name, ours.language) == (theirs.name, theirs.language)
        assert str(ours.bddl_file) == suite.get_task_bddl_file_path(task_id)
        assert ours.init_states_file.name == theirs.init_states_file
        assert ours.init_states_file.parent.parent.samefile(get_libero_path("init_states"))


def test_initial_states_are_torch_loads(libero_benchmark):
    suite, _ = libero_benchmark
    for task_id in range(num_tasks()):
        ours, theirs = read_init_states(task_info(task_id).init_states_file), suite.get_task_init_states(task_id)
        assert ours.dtype == theirs.dtype == np.float64 and ours.shape == theirs.shape and ours.shape[0] == 50
        np.testing.assert_array_equal(ours, theirs)


def test_a_file_that_is_not_a_numpy_array_is_refused(tmp_path):
    import torch

    tensor = tmp_path / "tensor.pruned_init"
    torch.save(torch.zeros(2, 3), tensor)  # torch's zip format, but a tensor
    with pytest.raises(InitStatesError, match="tensor.pruned_init: the pickle names torch._utils._rebuild_tensor"):
        read_init_states(tensor)
    other = tmp_path / "other.pruned_init"
    torch.save({"states": np.zeros((2, 3)), "run": print}, other)  # a global that is no part of an array
    with pytest.raises(InitStatesError, match=r"other.pruned_init: the pickle names (__builtin__|builtins).print"):
        read_init_states(other)
    text = tmp_path / "text.pruned_init"
    text.write_text("not a zip")
    with pytest.raises(InitStatesError, match="text.pruned_init: not torch's zip format"):
        read_init_states(text)
    with zipfile.ZipFile(tmp_path / "empty.pruned_init", "w") as archive:
        archive.writestr("archive/version", "3\n")
    with pytest.raises(InitStatesError, match="no single data.pkl"):
        read_init_states(tmp_path / "empty.pruned_init")
