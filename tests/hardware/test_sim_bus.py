"""The simulated bus speaks Feetech protocol 0 well enough for LeRobot's own FeetechMotorsBus, and answers from a
process of its own: in time whatever the test process does, gone when it is closed or its parent dies."""

import mmap
import os
import select
import signal
import subprocess
import sys
import termios
import time

import pytest
import serial
from lerobot.motors import Motor, MotorNormMode
from lerobot.motors.encoding_utils import decode_sign_magnitude, encode_sign_magnitude
from lerobot.motors.feetech import FeetechMotorsBus

from sgvla.so101.hardware import servo_server
from sgvla.so101.hardware.joints import GRIPPER, JOINTS, MOTOR_IDS
from sgvla.so101.hardware.port import make_load_tolerant
from sgvla.so101.hardware.servo_server import PING, READ, checksum, instruction_packet, status_packet
from sgvla.so101.hardware.sim_bus import BusClosed, HeldPose, SimFeetechBus, sim_calibration

from ..waiting import wait_until

pytestmark = pytest.mark.integration  # starts processes (tests/tiers.py)


@pytest.fixture
def sim():
    with SimFeetechBus() as bus:
        yield bus


def lerobot_bus(port: str, calibration: dict) -> FeetechMotorsBus:
    modes = {j: MotorNormMode.RANGE_0_100 if j == GRIPPER else MotorNormMode.DEGREES for j in JOINTS}
    bus = FeetechMotorsBus(port, {j: Motor(MOTOR_IDS[j], "sts3215", modes[j]) for j in JOINTS}, calibration)
    make_load_tolerant(bus)  # as the arms use it (sgvla/so101/hardware/port.py)
    bus.connect()  # with LeRobot's handshake: every id pinged once, no retries
    return bus


@pytest.fixture
def bus(sim):
    motors = {j: Motor(MOTOR_IDS[j], "sts3215", MotorNormMode.DEGREES) for j in JOINTS}
    lerobot = FeetechMotorsBus(sim.port, motors, calibration=sim_calibration())
    make_load_tolerant(lerobot)
    lerobot.connect()
    yield lerobot
    if not sim.closed:
        lerobot.disconnect(disable_torque=False)


def test_status_packet_layout():
    packet = status_packet(3, 0, bytes([0x10, 0x08]))
    assert packet[:2] == b"\xff\xff" and packet[2:5] == bytes([3, 4, 0])
    assert packet[-1] == checksum(packet[2:-1]) == (~(3 + 4 + 0 + 0x10 + 0x08)) & 0xFF


def test_sign_magnitude_coding_is_lerobots():
    for bit in (10, 11, 15):
        for value in (0, 1, -1, 300, -300, (1 << bit) - 1, -((1 << bit) - 1)):
            raw = encode_sign_magnitude(value, bit)
            assert servo_server.encode_sign_magnitude(value, bit) == raw
            assert servo_server.decode_sign_magnitude(raw, bit) == decode_sign_magnitude(raw, bit) == value
    with pytest.raises(ValueError, match="exceeds 2047"):
        servo_server.encode_sign_magnitude(2048, 11)


def test_ping_and_broadcast_ping_report_sts3215(bus):
    assert bus.ping("elbow_flex") == 777
    assert bus.broadcast_ping() == {i: 777 for i in range(1, 7)}


def test_the_server_says_how_it_kept_up_and_counts_replies_it_had_no_room_for(sim):
    """``health()`` is what a failing test prints to tell a lost reply's cause: here, a host that sends
    instructions and never reads the replies fills the pty's input, and the server counts what it could not send."""
    assert sim.health()["last_packet_s"] == -1.0  # nothing asked yet
    port = serial.Serial(sim.port, 1_000_000, timeout=0)
    try:
        port.write(instruction_packet(3, READ, bytes([56, 2])) * 20000)  # Present_Position, 8-byte replies
        wait_until(lambda: sim.packets >= 20000, 60, lambda: f"20000 packets handled, {sim.packets} so far")
        health = sim.health()
    finally:
        port.close()
    assert sim.packets == 20000
    assert 0 < health["unsent"] < 20000 and 0.0 <= health["last_packet_s"] < 60.0, health
    assert 0.0 < health["max_handle_s"] and 0.0 < health["max_gap_s"], health


def test_registers_read_back_what_was_written(sim, bus):
    bus.write("Homing_Offset", "wrist_flex", -300, normalize=False)  # sign-magnitude, bit 11
    assert bus.read("Homing_Offset", "wrist_flex", normalize=False) == -300
    assert sim.register(4, "Homing_Offset") == -300
    assert bus.read("Present_Position", "wrist_flex", normalize=False) == 2048 + 300  # present = encoder - offset
    bus.write_calibration(sim_calibration())
    assert bus.is_calibrated
    assert sim.packets > 10
    with pytest.raises(ValueError, match="unknown register 'Homing'.*Homing_Offset"):
        sim.register(4, "Homing")
    with pytest.raises(ValueError, match=r"no servo with id 9; ids are \[1, 2, 3, 4, 5, 6\]"):
        sim.remove(9)


def test_torque_on_moves_present_position_towards_goal(sim, bus):
    bus.write_calibration(sim_calibration())
    bus.enable_torque()
    bus.sync_write("Goal_Position", {j: 30.0 for j in JOINTS[:5]})
    time.sleep(0.4)  # eight time constants of the first-order servo
    present = bus.sync_read("Present_Position", JOINTS[:5])
    assert all(abs(v - 30.0) < 0.5 for v in present.values()), present
    assert bus.read("Moving", "shoulder_pan", normalize=False) == 0


def test_goal_is_clamped_to_the_position_limits(sim, bus):
    bus.write_calibration(sim_calibration())  # body joints limited to 1024..3072
    bus.enable_torque()
    bus.write("Goal_Position", "elbow_flex", 4000, normalize=False)
    time.sleep(0.4)
    assert abs(sim.positions()[3] - 3072) <= 2


def test_torque_off_follows_the_hand():
    with SimFeetechBus(motion=HeldPose((1000, 1100, 1200, 1300, 1400, 1500))) as sim:
        assert list(sim.positions().values()) == [1000, 1100, 1200, 1300, 1400, 1500]


def test_a_motion_that_cannot_reach_the_bus_process_is_refused():
    with pytest.raises(TypeError, match="motion must pickle.*SineMotion, not a lambda"):
        SimFeetechBus(motion=lambda t: [2048] * 6)


def test_dropped_and_corrupt_replies_are_retried(sim, bus):
    sim.drop_replies(1)
    assert len(bus.sync_read("Present_Position", num_retry=1)) == 6
    sim.corrupt_replies(1)
    assert len(bus.sync_read("Present_Position", num_retry=1)) == 6
    # Three tries of a sync_read of six motors, each answered with corrupt packets: the read fails (a retry may
    # read the previous try's leftovers first, so every reply of every try is corrupt).
    sim.corrupt_replies(3 * len(JOINTS))
    with pytest.raises(ConnectionError, match="Incorrect status packet"):
        bus.sync_read("Present_Position", num_retry=2)


def read_for(port: serial.Serial, size: int, sent: float) -> tuple[bytes, float | None]:
    """Up to ``size`` bytes within 5 s of ``sent``, and how long after ``sent`` the first came (None: nothing)."""
    got, first = b"", None
    while len(got) < size and time.monotonic() - sent < 5:
        select.select([port.fileno()], [], [], 0.05)
        got += port.read(size - len(got))
        first = first or (got and time.monotonic() - sent)
    return got, first


def test_late_replies_come_late_and_the_next_ones_wait_behind_them(sim):
    sim.late_replies(1, 0.3)
    port = serial.Serial(sim.port, 1_000_000, timeout=0)
    try:
        sent = time.monotonic()
        port.write(instruction_packet(1, PING))
        time.sleep(0.05)
        port.write(instruction_packet(2, PING))  # answered at once, but only after the late reply
        got, first = read_for(port, 12, sent)
    finally:
        port.close()
    assert got == status_packet(1, 0) + status_packet(2, 0)
    assert first >= 0.3, f"the late reply came after {first:.3f} s"


def test_a_stalled_bus_answers_what_came_meanwhile_and_its_health_says_when(sim):
    port = serial.Serial(sim.port, 1_000_000, timeout=0)
    try:
        sim.stall(0.7)
        sent = time.monotonic()
        port.write(instruction_packet(1, PING))
        got, first = read_for(port, 6, sent)
    finally:
        port.close()
    assert got == status_packet(1, 0) and first >= 0.6, f"answered after {first:.3f} s"
    health = sim.health()
    ended, seconds = health["stalls"][-1]
    assert health["max_gap_s"] >= 0.7 and seconds >= 0.7 and 0 < time.time() - ended < 5, health
    with pytest.raises(ValueError, match="stall of -1 s: 0 to 60 s"):
        sim.stall(-1)


def test_a_removed_motor_times_out(sim, bus):
    sim.remove(3)
    with pytest.raises(ConnectionError, match="no status packet"):
        bus.sync_read("Present_Position")
    assert bus.ping(3) is None and bus.ping(2) == 777
    sim.restore(3)
    assert len(bus.sync_read("Present_Position")) == 6


def test_unplugged_adapter_fails_reads(sim, bus):
    sim.unplug()
    with pytest.raises((ConnectionError, serial.SerialException, termios.error)):
        bus.sync_read("Present_Position")
    with pytest.raises(BusClosed, match="is closed"):
        sim.positions()


# -- the server's process ------------------------------------------------------------------------

CLIENT = """
import os, select, sys
port, flag = os.open(sys.argv[1], os.O_RDWR | os.O_NOCTTY), os.open(sys.argv[2], os.O_RDWR)
print("ready", flush=True)
sys.stdin.readline()
os.write(port, bytes.fromhex(sys.argv[3]))
reply = b""
while len(reply) < 6 and select.select([port], [], [], 5)[0]:
    reply += os.read(port, 64)
os.pwrite(flag, b"\\x01", 0)
print(reply.hex(), flush=True)
"""


def test_a_reply_arrives_while_this_process_holds_the_gil(sim, tmp_path):
    """The proof that the servos do not need the GIL of the process that owns the bus: another process PINGs a
    servo while this one runs a pure-Python loop (switch interval 10 s: no other thread of it may run) that ends
    only when the other process has its reply (a flag in a shared mapping, read without releasing the GIL)."""
    flag = tmp_path / "replied"
    flag.write_bytes(b"\x00")
    with flag.open("r+b") as f, mmap.mmap(f.fileno(), 1) as replied:
        client = subprocess.Popen([sys.executable, "-c", CLIENT, sim.port, str(flag),
                                   instruction_packet(1, PING).hex()], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True)
        try:
            assert client.stdout.readline() == "ready\n"
            interval = sys.getswitchinterval()
            sys.setswitchinterval(10.0)
            try:
                client.stdin.write("go\n")
                client.stdin.flush()  # the last moment this process lets go of the GIL
                start = time.monotonic()
                while not replied[0] and time.monotonic() - start < 2.0:
                    pass
                held_s = time.monotonic() - start
            finally:
                sys.setswitchinterval(interval)
            out = client.communicate(timeout=30)[0]
        finally:
            if client.poll() is None:
                client.kill()
                client.communicate()
    assert held_s < 2.0 and out.strip() == status_packet(1, 0).hex(), (held_s, out)


def test_an_instruction_with_missing_parameters_is_ignored(sim):
    port = os.open(sim.port, os.O_RDWR | os.O_NOCTTY)
    try:
        os.write(port, instruction_packet(2, READ) + instruction_packet(2, PING))  # READ without address and size
        reply = b""
        while len(reply) < 6 and select.select([port], [], [], 5)[0]:
            reply += os.read(port, 64)
        assert reply == status_packet(2, 0) and sim.packets == 2
    finally:
        os.close(port)


def test_the_server_process_imports_nothing_heavy(sim):
    heavy = [m for m in sim.server_modules() if m.split(".")[0] in ("torch", "lerobot", "mujoco", "numpy", "rclpy")]
    assert heavy == []


def test_the_server_runs_ahead_of_other_work(sim):
    """A session of its own whose scheduling group is nice -10 (a nice value alone is shared with the session's
    load where the kernel groups by session), and the process at nice -10; as root (the CI), all three hold."""
    from sgvla.so101.hardware.servo_server import SERVER_NICE

    pid = sim.server_pid
    assert os.getsid(pid) == pid != os.getsid(0)
    if os.geteuid() == 0:
        assert os.getpriority(os.PRIO_PROCESS, pid) == SERVER_NICE
        if os.path.exists(f"/proc/{pid}/autogroup"):  # kernels with autogroup scheduling
            with open(f"/proc/{pid}/autogroup") as f:
                assert f.read().split()[-1] == str(SERVER_NICE)


def test_close_ends_the_port_and_reaps_the_process():
    sim = SimFeetechBus()
    pid, port = sim.server_pid, sim.port
    assert os.path.exists(f"/proc/{pid}") and os.path.exists(port)
    sim.close()
    assert not os.path.exists(f"/proc/{pid}")  # exited and reaped: not even a zombie is left
    assert not os.path.exists(port) and sim.closed and sim.server_pid is None
    sim.close()  # twice is fine


ORPHAN = """
import time
from sgvla.so101.hardware.sim_bus import SimFeetechBus

bus = SimFeetechBus()
print(bus.server_pid, bus.port, flush=True)
time.sleep(120)
"""


def process_state(pid: int) -> str | None:
    """The state letter of a process (Z: exited, not reaped), None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


def test_the_server_dies_with_its_parent():
    parent = subprocess.Popen([sys.executable, "-c", ORPHAN], stdout=subprocess.PIPE, text=True)
    try:
        pid, port = parent.stdout.readline().split()
        assert process_state(int(pid)) not in (None, "Z") and os.path.exists(port)
    finally:
        parent.send_signal(signal.SIGKILL)  # no cleanup of any kind runs in the parent
        parent.wait()
        parent.stdout.close()
    wait_until(lambda: process_state(int(pid)) in (None, "Z") and not os.path.exists(port), 5,
               lambda: f"the bus process {pid} to end (state {process_state(int(pid))}) and {port} to go")


# -- the twin's bus --------------------------------------------------------------------------------

def after_ticks(clock, n: int) -> None:
    """Return once the twin's clock has run ``n`` more physics ticks."""
    start = clock.ticks
    wait_until(lambda: clock.ticks >= start + n, 5, lambda: f"{n} physics ticks after tick {start}: {clock.ticks}")


@pytest.mark.sim
def test_the_twin_bus_round_trips_positions_and_goals_through_shared_memory():
    from sgvla.so101.twin.bus import TwinClock, TwinFeetechBus, lerobot_of, radians_of
    from sgvla.so101.twin.config import load_twin_config
    from sgvla.so101.twin.twin import So101Twin

    twin = So101Twin(load_twin_config(), task_id=0)
    try:
        with TwinFeetechBus(twin) as sim:
            clock = TwinClock(twin, bus=sim).start()
            bus = lerobot_bus(sim.port, sim.calibration)
            try:
                # The servos report the twin's joints (one encoder step is 0.09 degrees).
                present, joints = bus.sync_read("Present_Position"), lerobot_of(twin.joint_positions())
                assert all(abs(present[j] - joints[j]) < 0.2 for j in JOINTS), (present, joints)
                # A goal written with torque on becomes the twin's joint target, and the joint gets there.
                bus.enable_torque()
                goal = {**present, "shoulder_pan": present["shoulder_pan"] + 20.0, "gripper": 60.0}
                bus.sync_write("Goal_Position", goal)
                want = radians_of(goal)
                wait_until(lambda: all(abs(twin.joint_targets()[j] - want[j]) < 0.002 for j in JOINTS), 5,
                           lambda: f"the twin's targets {twin.joint_targets()} to be {want}")
                speeds = []

                def arrived():
                    speeds.append(bus.read("Present_Velocity", "shoulder_pan", normalize=False))
                    return abs(bus.read("Present_Position", "shoulder_pan") - goal["shoulder_pan"]) < 1.0
                wait_until(arrived, 10, lambda: f"shoulder_pan at {goal['shoulder_pan']}: {bus.sync_read('Present_Position')}")
                assert max(speeds) > 0  # it moved up, and the servo's velocity said so
                # Torque off: the twin holds where it was when torque went off. "Arrived" is within a degree, still
                # moving, and the hold lands at the tick after the writes (12, answered once the servos published
                # them), so the arm comes to rest first: where it was is then one pose however late the hold lands
                # (read while moving, the pose was 0.011 rad short of the hold, on an idle machine).
                wait_until(lambda: max(abs(v) for v in twin.joint_velocities().values()) < 0.005, 10,
                           lambda: f"the twin at rest: velocities {twin.joint_velocities()}")
                held = twin.joint_positions()
                bus.disable_torque()
                after_ticks(clock, 2)  # the tick that applied the last write has ended
                targets = twin.joint_targets()
                assert all(abs(targets[j] - held[j]) < 0.002 for j in JOINTS[:5]), (targets, held)
                # ... and keeps holding there: a goal written with torque off moves nothing.
                bus.sync_write("Goal_Position", goal)  # no reply: the read after it is answered once it is in
                bus.read("Present_Position", "gripper")
                after_ticks(clock, 2)
                assert twin.joint_targets() == targets, (twin.joint_targets(), targets)
            finally:
                clock.close()
                bus.disconnect(disable_torque=False)
    finally:
        twin.close()
