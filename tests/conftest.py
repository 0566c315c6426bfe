"""Shared fixtures: a loopback-only ROS 2 environment with a domain id of its own per test.

Headless OpenGL for every test: MuJoCo picks its GL backend when it is first imported, by whichever test module
imports it first (tests/foundation/test_urdf.py does, without rendering), so a module setting MUJOCO_GL before its
own import is too late when it runs after that one (GLFW without a display: "gladLoadGL error").

Ctrl-C for every child: a shell without job control starts background commands (`make test &`, `nohup`, a CI step)
with SIGINT ignored, and an ignored signal stays ignored through fork and exec, so every child of such a pytest
would ignore the SIGINT that tests send as a user's Ctrl-C (`sgvla sim-bus` never ended, its fixture killed it
after 30 s). The tests' children get SIGINT as a terminal gives it: Python's KeyboardInterrupt here, the default
disposition after exec.

Every child ends with the session, even a killed one (tests/children.py)."""

import os
import signal

os.environ.setdefault("MUJOCO_GL", "egl")
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

import pytest  # noqa: E402

from .children import install as children_end_with_the_session  # noqa: E402
from .sim_eval_tools import SimEvalTools  # noqa: E402
from . import tiers  # noqa: E402

from sgvla.core.ros_env import loopback_env  # noqa: E402
from sgvla.core.sched import is_realtime  # noqa: E402
from sgvla.launch.ros_domain import lease_free_domain, with_leases  # noqa: E402

children_end_with_the_session()


@pytest.hookimpl(tryfirst=True)  # before xdist's, which reads the groups tiers.mark gives
def pytest_collection_modifyitems(config, items):
    tiers.mark(items)


@pytest.fixture(autouse=True)
def integration_checked(request, monkeypatch):
    """An unmarked test that starts a process or a ROS context fails (tests/tiers.py)."""
    if request.node.get_closest_marker("integration") is None:
        tiers.guard(monkeypatch)
    yield


@pytest.fixture
def ros_domain_leases():
    """`lease(n)`: n domain ids of this test's own, leased (sgvla.launch.ros_domain) until the test ends, so no other
    test, concurrent test session or sgvla launch on this machine runs on them meanwhile."""
    leases = []

    def lease(n: int = 1) -> list[int]:
        leases.extend(lease_free_domain() for _ in range(n))
        return [x.domain_id for x in leases[-n:]]

    yield lease
    for x in leases:
        x.release()


@pytest.fixture
def ros_domain_id(ros_domain_leases) -> int:
    """A domain id of this test's own (leased until it ends)."""
    return ros_domain_leases(1)[0]


@pytest.fixture
def ros_env(ros_domain_id) -> dict[str, str]:
    """Environment for child processes that start ROS 2 participants (loopback only); `sgvla launch --domain-id`
    in it knows the test holds the domain's lease."""
    return with_leases(loopback_env(ros_domain_id), [ros_domain_id])


@pytest.fixture(autouse=True)
def normal_scheduling():
    """Every child a test starts inherits this process's scheduling policy: a test that leaves it real-time (a video
    encoder did, see sgvla/core/sched.py) starves the simulated buses and nodes of every later test. Fail that test."""
    yield
    if is_realtime():
        policy, param = os.sched_getscheduler(0), os.sched_getparam(0)
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        pytest.fail(f"the test left the pytest process on a real-time scheduling policy ({policy}, {param})")


@pytest.fixture(scope="session")
def sim_eval() -> SimEvalTools:
    """The tools of the `sgvla launch sim_eval` equivalence tests; their domain leases end with the session."""
    tools = SimEvalTools()
    yield tools
    for lease in tools.leases:
        lease.release()
