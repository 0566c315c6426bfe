"""SO101 follower and leader arms: LeRobot's SO101Follower/SO101Leader behind checks and a safety layer.

LeRobot talks to the Feetech bus; this module decides what may be said. Before any motor moves,
the port and the calibration file are checked (clear errors instead of LeRobot's prompt). Every
follower goal goes through :func:`sgvla.so101.hardware.safety.safe_goal`; a watchdog holds position when
commands stop; a motor that stops answering (reads failing for ``fault_after_s``, each after LeRobot's bounded
retries) is a fault that names the motor, turns torque off and keeps the last good state.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from lerobot.robots.so_follower import SO101Follower, SO101FollowerConfig
from lerobot.teleoperators.so_leader import SO101Leader, SO101LeaderConfig

from sgvla.so101.hardware.calibration import (
    CalibrationError,
    arm_calibration_path,
    calibrate_hint,
    load_arm_calibration,
)
from sgvla.so101.hardware.config import ArmConfig
from sgvla.so101.hardware.joints import JOINTS, MOTOR_IDS, action_key
from sgvla.so101.hardware.port import answers_ping, make_load_tolerant
from sgvla.so101.hardware.safety import SafetyConfig, Watchdog, safe_goal

# Whatever the bus raises is a fault: ConnectionError (no or bad status packet), RuntimeError (a motor
# reports an error), serial.SerialException or termios.error (the USB adapter vanished), and even
# IndexError from scservo_sdk on a garbled reply. An arm whose line misbehaves is not trusted further.
BUS_ERRORS = (Exception,)
# Of those, a line that went quiet or garbled a reply: a read is tried again for ArmConfig.fault_after_s. The others
# (a port that is gone, a motor's own error) fault at once.
SILENT_BUS = (ConnectionError, IndexError)

log = logging.getLogger(__name__)


class ArmError(RuntimeError):
    """The arm cannot be used as configured (port, calibration, motors)."""


class ArmFault(ArmError):
    """The arm failed while running. Torque was turned off; ``last_state`` is the last good reading."""

    def __init__(self, message: str, last_state: ArmState | None):
        super().__init__(message)
        self.last_state = last_state


@dataclass(frozen=True)
class ArmState:
    positions: dict[str, float]  # LeRobot units by joint: degrees, gripper 0..100
    stamp: float  # time.monotonic() of the reading


class _Arm:
    role: str

    def __init__(self, config: ArmConfig):
        self.config = config
        self.last_state: ArmState | None = None
        self.calibration_path = arm_calibration_path(self.role, config.id, config.calibration_dir)
        self.device: SO101Follower | SO101Leader | None = None

    def _make_device(self, calibration_dir: Path):
        raise NotImplementedError

    def _read_values(self) -> dict[str, float]:
        raise NotImplementedError

    def connect(self) -> ArmState:
        """Open the port, bring the motors' calibration in line with the file, configure, read once."""
        port = self.config.port
        if not Path(port).exists():
            raise ArmError(f"{self.role} port not found: {port}. Plug the arm's USB adapter in; "
                           f"`lerobot-find-port` tells which port it is.")
        try:
            calibration = load_arm_calibration(self.calibration_path)
        except CalibrationError as e:
            raise ArmError(f"{self.role} calibration: {e}; {calibrate_hint(self.role, port, self.config.id)}") from None
        attempts = self.config.read_retries + 1  # LeRobot retries no setup write: retry the whole setup
        for _ in range(attempts):
            self.device = self._make_device(self.calibration_path.parent)
            make_load_tolerant(self.device.bus)  # replies that came are not lost to a preempted reader
            try:
                self._bring_up(calibration)
                return self.read()
            except BUS_ERRORS as e:
                self._release()
                error = e
                log.warning("%s arm on %s: setup failed: %s", self.role, port, str(e).strip())
        raise ArmError(f"{self.role} arm on {port}: setup failed {attempts} times: {str(error).strip()}") from error

    def _bring_up(self, calibration: dict) -> None:
        """LeRobot's connect(), minus its interactive calibration prompt, plus a hold before torque is on."""
        bus = self.device.bus
        bus.connect()
        if not bus.is_calibrated:
            bus.disable_torque()
            bus.write_calibration(calibration)
        # Goal := present before any torque is enabled, so configure() cannot make the arm jump.
        bus.sync_write("Goal_Position", bus.sync_read("Present_Position", normalize=False), normalize=False)
        self.device.configure()

    def read(self) -> ArmState:
        """Present positions. A read the bus fails (no or a garbled reply, after LeRobot's retries) is tried again
        until it has failed for ``fault_after_s``; then, or at once for other errors, a fault (torque off,
        ArmFault). No goal is sent meanwhile: the servos hold the last one."""
        self._require_connected()
        values = self._tolerant(self._read_values, "read")
        self.last_state = ArmState({j: float(values[action_key(j)]) for j in JOINTS}, time.monotonic())
        return self.last_state

    def _tolerant[T](self, operation: Callable[[], T], what: str) -> T:
        """``operation`` on the bus, tried again while the line is silent or garbles replies, for up to
        ``fault_after_s`` (a host that did not run the bus's reader for a second is no fault of the arm); then, or
        at once for other errors, a fault. Every bus exchange that waits for a reply goes through here: reads, the
        torque switch and the hold of a managed node's activation."""
        failing_since, tries = None, 0
        while True:
            try:
                result = operation()
                break
            except SILENT_BUS as e:
                tries += 1
                now = time.monotonic()
                if failing_since is None:
                    failing_since = now
                    log.warning("%s arm on %s: a %s failed (%s); trying again for up to %g s", self.role,
                                self.config.port, what, str(e).strip(), self.config.fault_after_s)
                if now - failing_since >= self.config.fault_after_s:
                    self._fault(e, f"for {now - failing_since:.1f} s, {tries} {what}(s)")
            except BUS_ERRORS as e:
                self._fault(e, f"{tries + 1} {what}(s)")
        if tries:
            log.warning("%s arm on %s: the bus answers again after %.2f s", self.role, self.config.port,
                        time.monotonic() - failing_since)
        return result

    def close(self) -> None:
        """Torque off and release the port (also after a fault)."""
        if self.device is None:
            return
        try:
            self.device.bus.disconnect(disable_torque=True)
        except BUS_ERRORS:
            self._release()
        self.device = None

    def _require_connected(self) -> None:
        if self.device is None:
            raise ArmError(f"{self.role} arm on {self.config.port} is not connected (closed, or after a fault)")

    def _fault(self, error: Exception, how_long: str = "") -> NoReturn:
        """Torque off where motors answer, port closed, ArmFault naming the silent motors. ``how_long``: how long
        an exchange that waits for a reply failed (:meth:`_tolerant`); other bus operations say nothing."""
        silent = self._silent_motors()
        self._release()
        if len(silent) == len(JOINTS):
            who = "no motor answers (USB adapter unplugged or servo power off?)"
        elif silent:
            who = f"motor(s) {', '.join(f'{j} (id {MOTOR_IDS[j]})' for j in silent)} stopped answering"
        else:
            who = "the bus kept failing (garbled replies or a motor error)"
        tries = f"{how_long} of {self.config.read_retries + 1} tries each" if how_long else \
            f"{self.config.read_retries + 1} tries"
        raise ArmFault(f"{self.role} arm on {self.config.port}: {who} ({tries}: {str(error).strip()}); "
                       f"torque turned off where motors still answer",
                       self.last_state) from error

    def _silent_motors(self) -> list[str]:
        """The joints whose motor answers neither of two pings; all of them when the port itself fails."""
        bus = self.device.bus
        try:
            return [j for j in JOINTS if not any(answers_ping(bus.port_handler, bus.packet_handler, MOTOR_IDS[j])
                                                 for _ in range(2))]
        except OSError:  # the port itself is gone (unplugged adapter)
            return list(JOINTS)

    def _release(self) -> None:
        """Best effort: torque off on every motor that still answers, then close the port."""
        if self.device is None:
            return
        bus = self.device.bus
        self.device = None
        if not bus.port_handler.is_open:
            return
        for joint in JOINTS:
            try:
                bus.write("Torque_Enable", joint, 0, num_retry=1)
            except BUS_ERRORS:
                pass
        try:
            bus.port_handler.closePort()
        except BUS_ERRORS:
            pass


class LeaderArm(_Arm):
    """The arm moved by hand for teleoperation; torque stays off (LeRobot's SO101Leader.configure)."""

    role = "leader"

    def _make_device(self, calibration_dir: Path) -> SO101Leader:
        return SO101Leader(SO101LeaderConfig(port=self.config.port, id=self.config.id, calibration_dir=calibration_dir,
                                             num_read_retries=self.config.read_retries))

    def _read_values(self) -> dict[str, float]:
        return self.device.get_action()


class FollowerArm(_Arm):
    """The arm that moves. Safety is not optional: there is no way to send a goal around it."""

    role = "follower"

    def __init__(self, config: ArmConfig, safety: SafetyConfig):
        super().__init__(config)
        self.safety = safety
        self.watchdog = Watchdog(safety.command_timeout_s)
        self.target: dict[str, float] = {}
        self.holding = False

    def _make_device(self, calibration_dir: Path) -> SO101Follower:
        return SO101Follower(SO101FollowerConfig(port=self.config.port, id=self.config.id,
                                                 calibration_dir=calibration_dir, use_degrees=True,
                                                 disable_torque_on_disconnect=True,
                                                 num_read_retries=self.config.read_retries))

    def _read_values(self) -> dict[str, float]:
        return self.device.get_observation()

    def connect(self) -> ArmState:
        state = super().connect()
        self.holding = True  # connect() left every goal at the present position
        return state

    def command(self, goal: Mapping[str, float]) -> None:
        """A new target (LeRobot units, any subset of joints); :meth:`step` moves towards it.

        Raises UnsafeCommand, keeping the previous target, for unknown joints or non-finite values."""
        self._require_connected()
        self.target = {**self.target, **safe_goal(goal, self.last_state.positions, self.safety, max_step=math.inf)}
        self.watchdog.feed()

    def step(self) -> dict[str, float] | None:
        """Call every control tick after :meth:`read`: sends the target, at most ``max_step`` away from the
        present position, while commands are fresh; holds the present position once they are stale.

        Returns what was sent, or None while holding."""
        self._require_connected()
        if self.watchdog.stale:
            if not self.holding:
                self.hold()
            return None
        safe = safe_goal(self.target, self.last_state.positions, self.safety)
        try:
            self.device.send_action({action_key(j): v for j, v in safe.items()})
        except BUS_ERRORS as e:
            self._fault(e)
        self.holding = False
        return safe

    def set_torque(self, enabled: bool) -> None:
        """Torque on (after goal := present, so the arm holds where it is) or off (limp). A managed node turns it
        on when it activates and off when it cleans up."""
        self._require_connected()
        if enabled:
            self.hold()
        bus, retries = self.device.bus, self.config.read_retries
        self._tolerant(lambda: bus.enable_torque(num_retry=retries) if enabled else bus.disable_torque(
            num_retry=retries), "torque write")
        self.watchdog = Watchdog(self.safety.command_timeout_s)  # no old command counts as fresh
        self.target = {}

    def hold(self) -> None:
        """Stop where the arm is: goal := present position, in raw encoder steps (no rounding)."""
        self._require_connected()
        bus = self.device.bus
        present = self._tolerant(lambda: bus.sync_read("Present_Position", normalize=False,
                                                       num_retry=self.config.read_retries), "read")
        try:
            bus.sync_write("Goal_Position", present, normalize=False)
        except BUS_ERRORS as e:
            self._fault(e)
        self.target = {}
        self.holding = True
