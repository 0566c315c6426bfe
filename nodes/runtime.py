"""How every sgvla node runs: init, build, spin until shutdown or a requested exit, clean up."""

import time

import rclpy
from rclpy.executors import ExternalShutdownException


class NodeExit(Exception):
    """Raised from a callback to end the node's spin with an exit code."""

    def __init__(self, code: int = 0):
        super().__init__(code)
        self.code = code


def run_node(factory, args=None) -> int:
    """`rclpy.init`, build the node, spin until Ctrl-C, an external shutdown, `NodeExit` or
    `SystemExit`; `destroy_node` always runs (arm nodes turn torque off there). Returns the exit code."""
    rclpy.init(args=args)
    node = None
    code = 0
    try:
        node = factory()
        rclpy.spin(node)
    except (NodeExit, SystemExit) as e:
        code = e.code if isinstance(e.code, int) else 0
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
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
