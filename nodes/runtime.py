"""How every sgvla node runs: init, build, spin until a stop is asked for or a requested exit, clean up.

SIGINT and SIGTERM only *ask* for a stop: spinning ends between two callbacks and `destroy_node` then runs to
its end, whatever signals follow. Ctrl-C reaches a launched node twice (the terminal's process group and the
launch), and rclpy's own handlers would cut a callback short (an RCLError traceback) or the cleanup itself,
which for the arm nodes is turning torque off.
"""

import signal
import time

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.signals import SignalHandlerOptions

POLL_S = 0.1  # longest wait between a stop signal and the end of spinning


class NodeExit(Exception):
    """Raised from a callback to end the node's spin with an exit code."""

    def __init__(self, code: int = 0):
        super().__init__(code)
        self.code = code


class StopSignals:
    """From its creation on, SIGINT and SIGTERM only set `requested`; after `ignore` they do nothing, for the
    rest of the process (Python would restore their default, fatal action while the interpreter exits)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.requested = False
        for sig in self.SIGNALS:
            signal.signal(sig, self._request)

    def _request(self, _signum, _frame) -> None:
        self.requested = True

    def ignore(self) -> None:
        """Shutdown has begun: the cleanup and the process's exit run to their end (SIGKILL still ends it)."""
        for sig in self.SIGNALS:
            signal.signal(sig, signal.SIG_IGN)


def init(args=None) -> StopSignals:
    """`rclpy.init` without rclpy's signal handlers; stop signals are caught before any node exists."""
    stop = StopSignals()
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    return stop


def spin_until_stopped(executor, stop: StopSignals) -> None:
    """Spin until a stop signal or an external shutdown; exceptions of callbacks (NodeExit) propagate."""
    while not stop.requested and executor.context.ok():
        executor.spin_once(timeout_sec=POLL_S)


def run_node(factory, args=None) -> int:
    """Build the node, spin until a stop signal, an external shutdown, `NodeExit` or `SystemExit`;
    `destroy_node` always runs to its end (arm nodes turn torque off there). Returns the exit code."""
    stop = init(args)
    node = None
    code = 0
    try:
        node = factory()
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        spin_until_stopped(executor, stop)
    except (NodeExit, SystemExit) as e:
        code = e.code if isinstance(e.code, int) else 0
    except ExternalShutdownException:
        pass
    finally:
        stop.ignore()
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return code


def wait_until(predicate, timeout_s: float, period_s: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(period_s)
    return True
