"""How every sgvla node runs: init, build, spin until a stop is asked for or a requested exit, clean up.

SIGINT and SIGTERM only *ask* for a stop: spinning ends between two callbacks and `destroy_node` then runs to
its end, whatever signals follow. Ctrl-C reaches a launched node twice (the terminal's process group and the
launch), and rclpy's own handlers would cut a callback short (an RCLError traceback) or the cleanup itself,
which for the arm nodes is turning torque off.

A constructor that raises half way (a camera that is not plugged in, an arm port that does not exist) is a
failed start, not a crash: `build` keeps hold of the half-built node, `report_start_failure` logs the error as
one line (`[FATAL] [...] [node]: cannot start: ...`; a traceback too where the error is a bug rather than bad
input or a missing device), and `destroy` releases what the constructor had acquired without ever raising.
Without this, rclpy's context destroys the half-built node at shutdown and its `destroy_node` fails on what was
never made (an AttributeError on top of the real error). Nodes that own things derive from `ResourceNode`.
"""

import faulthandler
import logging
import signal
import sys
import time
import traceback
from contextlib import ExitStack

import rclpy
from rclpy.exceptions import NameValidationException, ParameterException
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from sgvla_ros.dds_log import apply_dds_log_level

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


class RclLogHandler(logging.Handler):
    """The library's Python log (``sgvla.*``: an episode saved, a camera reconnected) through rcl's logging, so a
    node's operator sees it where the node's own lines go (console, `/rosout`, the launch's output), with the
    logger's name. Without it those INFO lines were dropped: Python logging prints only warnings by default."""

    LEVELS = {logging.DEBUG: "debug", logging.INFO: "info", logging.WARNING: "warning", logging.ERROR: "error",
              logging.CRITICAL: "fatal"}

    def emit(self, record: logging.LogRecord) -> None:
        try:
            level = self.LEVELS[max(lvl for lvl in self.LEVELS if lvl <= max(record.levelno, logging.DEBUG))]
            getattr(rclpy.logging.get_logger(record.name), level)(self.format(record))
        except Exception:  # a log line must never end a node
            self.handleError(record)


def forward_library_log() -> None:
    """Send ``sgvla``'s Python log at INFO and above through rcl (once per process)."""
    library = logging.getLogger("sgvla")
    if not any(isinstance(h, RclLogHandler) for h in library.handlers):
        library.addHandler(RclLogHandler())
        library.setLevel(logging.INFO)
        library.propagate = False


def init(args=None) -> StopSignals:
    """`rclpy.init` without rclpy's signal handlers; stop signals are caught before any node exists; the library's
    log goes through rcl. A crash in native code (a segmentation fault in a driver, DDS or a renderer) prints every
    thread's Python stack to stderr (faulthandler), so the launcher's log says where a node died. Fast DDS's own
    warnings where the environment asks for them (dds_log); a bad value ends the process with its message."""
    faulthandler.enable()
    try:
        apply_dds_log_level()
    except (ValueError, RuntimeError) as e:
        raise SystemExit(f"cannot start: {e}") from None
    stop = StopSignals()
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    forward_library_log()
    return stop


def spin_until_stopped(executor, stop: StopSignals) -> None:
    """Spin until a stop signal or an external shutdown; exceptions of callbacks (NodeExit) propagate."""
    while not stop.requested and executor.context.ok():
        executor.spin_once(timeout_sec=POLL_S)


START_FAILED = 1  # a node's exit code when its constructor raised
# Errors that say what is wrong with the input or the machine (bad parameters, names or config, a missing device,
# file or package): one line is the whole story. Anything else is a bug in the node, shown with its traceback.
INPUT_ERRORS = (ValueError, OSError, RuntimeError, ImportError, NameValidationException, ParameterException)


class OwnsResources:
    """What a node acquired, released last first, exactly once: at destroy (also after a constructor that failed
    half way) and, for managed nodes, at cleanup and shutdown."""

    def __init__(self, node_name: str, **kwargs):
        self.resources = ExitStack()  # before rclpy's part of the node: it exists whatever fails after this line
        super().__init__(node_name, **kwargs)

    def own(self, thing, release=None):
        """`thing`, with `release` (default: its close) to be called when the node releases what it holds."""
        self.resources.callback(release or thing.close)
        return thing

    def destroy_node(self):
        try:
            self.resources.close()  # every release runs, even after one that raises
        finally:
            super().destroy_node()


class DescribedParameters:
    """Every parameter declared with a descriptor: its description (its comment in config/ros/*.yaml, where the
    parameters are documented: sgvla.launch.parameter_docs), its type (its default's: another type is refused), and
    read-only unless the node names it in `live_parameters`, the ones it reads each time it uses them. So `ros2 param
    set` on a parameter that needs a restart is refused with rclpy's reason instead of being ignored, and a live one
    is checked (`check_parameter`: a duration or a rate must be a positive number) before it is taken."""

    live_parameters: frozenset[str] = frozenset()

    def declare_parameter(self, name, value=None, descriptor=None, ignore_override=False, *, minimum=None,
                          maximum=None, description=""):
        """rclpy's declare_parameter with the descriptor made here: `minimum`/`maximum` give an integer or number
        its range (a value outside it, given at start or set later, is refused with rclpy's reason); `description`
        stands where no parameter file documents the parameter."""
        from rcl_interfaces.msg import ParameterDescriptor

        from sgvla.launch.parameter_docs import parameter_doc

        if descriptor is None:
            descriptor = ParameterDescriptor(name=name, description=parameter_doc(self.get_name(), name) or description,
                                             read_only=name not in self.live_parameters)
            if minimum is not None or maximum is not None:
                self._set_range(descriptor, value, minimum, maximum)
        if self.live_parameters and not getattr(self, "_checks_live_parameters", False):
            self._checks_live_parameters = True
            self.add_on_set_parameters_callback(self._check_live_parameters)
        return super().declare_parameter(name, value, descriptor, ignore_override)

    @staticmethod
    def _set_range(descriptor, value, minimum, maximum) -> None:
        """An integer range (value an int) or a floating-point range (a float) from the bounds, open ends as the
        type's extremes, no step."""
        import sys

        from rcl_interfaces.msg import FloatingPointRange, IntegerRange

        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{descriptor.name}: a range needs an integer or number default, got {value!r}")
        if isinstance(value, int):
            low, high = -(2 ** 63), 2 ** 63 - 1
            descriptor.integer_range = [IntegerRange(
                from_value=low if minimum is None else int(minimum), to_value=high if maximum is None else int(maximum),
                step=0)]
        else:
            big = sys.float_info.max
            descriptor.floating_point_range = [FloatingPointRange(
                from_value=-big if minimum is None else float(minimum),
                to_value=big if maximum is None else float(maximum), step=0.0)]

    def declare_settings(self, cls):
        """Declare every field of the settings dataclass `cls` (`sgvla.core.settings`) as a parameter: its default,
        its type, its minimum as the range, its help where no parameter file documents it; returns the settings
        with the parameters' values."""
        from sgvla.core.settings import specs

        for spec in specs(cls):
            self.declare_parameter(spec.name, spec.default, minimum=spec.minimum, description=spec.help)
        return cls(**{spec.name: self.get_parameter(spec.name).value for spec in specs(cls)})

    @staticmethod
    def check_parameter(name: str, value) -> str:
        """Why `value` cannot be taken for the live parameter `name` ("" when it can)."""
        if name.endswith(("_s", "_hz")) and not (isinstance(value, (int, float)) and value > 0):
            return f"{name} must be a positive number ({'seconds' if name.endswith('_s') else 'Hz'}), got {value!r}"
        return ""

    def _check_live_parameters(self, parameters):
        from rcl_interfaces.msg import SetParametersResult

        for parameter in parameters:
            reason = self.check_parameter(parameter.name, parameter.value)
            if reason:
                return SetParametersResult(successful=False, reason=reason)
        return SetParametersResult(successful=True)


class SgvlaNode(DescribedParameters, Node):
    """A node of sgvla that holds nothing to release (see `ResourceNode` for one that does)."""


class ResourceNode(OwnsResources, DescribedParameters, Node):
    """A node that holds things to release: an arm's torque, cameras, threads, files, a terminal's mode.

    The constructor hands each to `own` (or `self.resources.enter_context`) right after acquiring it; destroy_node
    releases, last acquired first, exactly what was acquired, also when the constructor failed half way."""


class HardwareNode(OwnsResources, DescribedParameters, LifecycleNode):
    """A ROS 2 managed (lifecycle) node for hardware: configure = connect (`connect`), activate = stream (`activate`:
    an arm turns torque on), deactivate = hold (`deactivate`), cleanup = release what `connect` acquired (an arm's
    torque off); shutdown and destroy release it too. Topics publish only while active (lifecycle publishers).

    With the parameter `autostart` (default true: `sgvla launch` and the launch files rely on it) the node configures
    and activates itself when it starts; a transition that fails is a failed start with the hardware's own error.
    Without it, a lifecycle manager (or `ros2 lifecycle set`) drives the transitions."""

    def __init__(self, node_name: str, **kwargs):
        self.failure: Exception | None = None
        self._autostarting = False
        super().__init__(node_name, **kwargs)
        self.declare_parameter("autostart", True)

    def connect(self) -> None: ...

    def activate(self) -> None: ...

    def deactivate(self) -> None: ...

    def _transition(self, step) -> TransitionCallbackReturn:
        try:
            step()
        except Exception as e:  # the hardware's own error is what the operator needs to see
            self.failure = e
            if not self._autostarting:  # a failed autostart is reported once, as the failed start
                self.get_logger().error(f"{step.__name__} failed: {describe(e)}")
            self.resources.close()
            return TransitionCallbackReturn.FAILURE
        return TransitionCallbackReturn.SUCCESS

    def on_configure(self, state) -> TransitionCallbackReturn:
        return self._transition(self.connect)

    def on_activate(self, state) -> TransitionCallbackReturn:
        result = self._transition(self.activate)
        return super().on_activate(state) if result == TransitionCallbackReturn.SUCCESS else result

    def on_deactivate(self, state) -> TransitionCallbackReturn:
        self._transition(self.deactivate)
        return super().on_deactivate(state)

    def on_cleanup(self, state) -> TransitionCallbackReturn:
        self.resources.close()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state) -> TransitionCallbackReturn:
        self.resources.close()
        return TransitionCallbackReturn.SUCCESS

    def autostart(self) -> None:
        """Configure and activate now (when `autostart` is set); StartFailed with the hardware's error otherwise."""
        if not self.get_parameter("autostart").value:
            self.get_logger().info("waiting for lifecycle transitions (autostart: false)")
            return
        self._autostarting = True
        try:
            for trigger in (self.trigger_configure, self.trigger_activate):
                if trigger() != TransitionCallbackReturn.SUCCESS:
                    raise StartFailed(self, self.failure or RuntimeError(f"{trigger.__name__} failed"))
        finally:
            self._autostarting = False

    @property
    def active(self) -> bool:
        return self._state_machine.current_state[1] == "active"

    def destroy_node(self):
        """Also destroy the lifecycle state machine, which holds rcl's node: without this, rclpy's destroy_node
        leaves the node (in a one-node process, its DDS participant and threads) alive until the interpreter's
        own teardown collects the state machine, racing native code already torn down. A camera node that could
        not open its device died so, once, with a segmentation fault after its `cannot start` line."""
        try:
            super().destroy_node()
        finally:
            machine = getattr(self, "_state_machine", None)  # absent when LifecycleNode's constructor failed
            if machine is not None:
                machine.destroy_when_not_in_use()


class StartFailed(Exception):
    """A node's constructor raised `error`; `node` is the half-built node, for `destroy`."""

    def __init__(self, node: Node, error: Exception):
        super().__init__(f"{type(node).__name__}: {error}")
        self.node, self.error = node, error


def build(node_class: type, **kwargs) -> Node:
    """`node_class(**kwargs)`, except that when the constructor raises, the half-built object comes with the error
    (StartFailed): it has to be destroyed (`destroy`) to release what the constructor had acquired."""
    node = node_class.__new__(node_class)
    try:
        node.__init__(**kwargs)
    except Exception as e:
        raise StartFailed(node, e) from e
    if isinstance(node, HardwareNode):
        node.autostart()  # configure and activate, unless a lifecycle manager is to
    return node


def _has_rcl_node(node: Node) -> bool:
    """Whether rclpy's part of the node was made (Node.__init__ got that far): only then is there one to destroy."""
    try:
        node.handle
    except AttributeError:
        return False
    return True


def node_logger(node: Node, fallback: str):
    return node.get_logger() if _has_rcl_node(node) else rclpy.logging.get_logger(fallback)


def describe(error: BaseException) -> str:
    """`Type: message` on one line (rclpy's name errors add a line with a caret under the bad character)."""
    text = "; ".join(line.strip() for line in str(error).splitlines() if line.strip(" ^"))
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def report_start_failure(failure: StartFailed, fallback_name: str) -> None:
    """One line, `cannot start: <error>`, in the node's log; a bug's traceback goes before it."""
    if not isinstance(failure.error, INPUT_ERRORS):
        sys.stderr.write("".join(traceback.format_exception(failure.error)))
        sys.stderr.flush()
    node_logger(failure.node, fallback_name).fatal(f"cannot start: {describe(failure.error)}")


def destroy(node: Node, fallback_name: str = "sgvla_ros") -> None:
    """`node.destroy_node()` that never raises: a failing cleanup is one logged line, and rclpy's part of the node
    is destroyed anyway (so that rclpy's shutdown does not try again)."""
    if not _has_rcl_node(node):
        return
    try:
        node.destroy_node()
    except Exception as e:
        node_logger(node, fallback_name).error(f"cleanup failed: {describe(e)}")
        try:
            Node.destroy_node(node)
        except Exception:  # already destroyed as far as it got; nothing more to release here
            pass


def run_node(factory: type, args=None) -> int:
    """Build the node, spin until a stop signal, an external shutdown, `NodeExit` or `SystemExit`;
    `destroy_node` always runs to its end (arm nodes turn torque off there), also after a failed start (exit code
    START_FAILED, the error as one line). Returns the exit code."""
    stop = init(args)
    node = None
    code = 0
    try:
        node = build(factory)
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        spin_until_stopped(executor, stop)
    except StartFailed as e:
        node, code = e.node, START_FAILED
        report_start_failure(e, factory.__module__.rsplit(".", 1)[-1])
    except (NodeExit, SystemExit) as e:
        code = e.code if isinstance(e.code, int) else 0
    except ExternalShutdownException:
        pass
    finally:
        stop.ignore()
        if node is not None:
            destroy(node, factory.__module__.rsplit(".", 1)[-1])
        rclpy.try_shutdown()
    return code


def positive_parameter(node: Node, name: str) -> float:
    """A parameter that must be > 0 (a rate, a period), or a ValueError naming the node and the parameter."""
    value = node.get_parameter(name).value
    if not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"{node.get_name()}: parameter {name} must be > 0, got {value!r}")
    return float(value)


async def sleep(node: Node, seconds: float) -> None:
    """Wait in a coroutine callback (an action's execute) without blocking the executor: a one-shot timer of
    ``node`` completes a future the coroutine awaits."""
    from rclpy.task import Future

    future = Future()
    timer = node.create_timer(seconds, lambda: future.done() or future.set_result(True))
    try:
        await future
    finally:
        node.destroy_timer(timer)


def wait_until(predicate, timeout_s: float, period_s: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(period_s)
    return True
