"""Who is on a ROS 2 domain of this machine: a free domain for a launch, and a check of one chosen by hand.

sgvla's participants are loopback-only (`sgvla.core.ros_env`), so only participants on this machine can cross-talk with
a launch. Two looks at domain d, both on this machine only:

- ports (milliseconds): every RTPS participant (Fast DDS, Cyclone DDS) of domain d binds UDP ports at fixed offsets
  from 7400 + 250 d: the shared multicast ports (+0, +1) and, for participant index k (0..119), its unicast
  metatraffic (+10 + 2k) and user (+11 + 2k) ports. A port that cannot be bound on 127.0.0.1 is held; the kernel's
  socket tables (/proc/net/udp, /proc/<pid>/fd) tell which processes hold them, where this user may look.
- discovery: `python -m sgvla_ros.domain_probe`, a child process (this library has no ROS imports), joins the
  domain as one short-lived participant with the nodes' loopback-only environment and lists the ROS nodes it
  discovers. On a loaded 2-core machine the first node of a busy domain showed up within 2 s, every node within
  3.2 s (a participant announces itself every 3 s). It waits PROBE_WAIT_S where the ports showed nobody (about 3 s
  in all with its start: the cost of `--domain-id` on a free domain) and up to BUSY_WAIT_S where they showed
  someone, to name them; it stops early once its list of nodes has been steady for a second.

Both looks see only participants that already run: two sgvla processes that choose a domain at the same moment
(two launches, two concurrent test sessions) both see it empty. A lease closes that window among sgvla processes of
this user: `DomainLease` holds an exclusive `flock` on one file per domain id (in LEASE_DIR) from before the look
until the launch (or the test) ends; the kernel drops it when its process dies, so a killed run never leaves a
domain taken. A process that runs on a domain its parent leased (a test that starts `sgvla launch --domain-id`)
finds the id in LEASED_ENV and does not lease it again.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import tempfile
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from sgvla.core.ros_env import MAX_DOMAIN_ID, loopback_env

PORT_BASE, DOMAIN_GAIN, PARTICIPANTS = 7400, 250, 120
PROBE_WAIT_S = 2.5  # discovery wait of the probe on an empty domain (its start, about 0.5 s, comes on top)
BUSY_WAIT_S = 5.0  # at most, where the ports show participants: time to discover their nodes' names
PROBE_TIMEOUT_S = 60.0  # the probe's whole run, interpreter and rclpy start included, on a loaded machine


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def participant_ports(domain_id: int, participant: int) -> tuple[int, int]:
    """The unicast (metatraffic, user) ports of participant index `participant` of a domain."""
    base = PORT_BASE + DOMAIN_GAIN * domain_id
    return base + 10 + 2 * participant, base + 11 + 2 * participant


def held_ports(domain_id: int, participants: int = PARTICIPANTS) -> list[int]:
    """The domain's ports that something on this machine holds."""
    base = PORT_BASE + DOMAIN_GAIN * domain_id
    ports = [base, base + 1] + [p for k in range(participants) for p in participant_ports(domain_id, k)]
    return [p for p in ports if not _port_free(p)]


LEASE_DIR = Path(tempfile.gettempdir()) / f"sgvla-ros-domains-{os.getuid()}"
LEASED_ENV = "SGVLA_LEASED_ROS_DOMAINS"  # comma-separated ids an ancestor process holds leases on


class DomainLease:
    """An exclusive claim on one ROS domain id among this user's sgvla processes, until `release` (or the process
    ends). `holder` names who holds it when `acquired` is false."""

    def __init__(self, domain_id: int) -> None:
        if not 0 <= domain_id <= MAX_DOMAIN_ID:
            raise ValueError(f"ROS domain id {domain_id} outside 0..{MAX_DOMAIN_ID}")
        self.domain_id, self.holder = domain_id, ""
        LEASE_DIR.mkdir(mode=0o700, exist_ok=True)
        self._fd: int | None = os.open(LEASE_DIR / f"{domain_id}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.holder = os.pread(self._fd, 4096, 0).decode(errors="replace").strip() or "another sgvla process"
            self.release()
            return
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"pid {os.getpid()} ({command_line(os.getpid())})".encode(), 0)

    @property
    def acquired(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor of the open file drops its flock
            self._fd = None

    def __enter__(self) -> "DomainLease":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def leased_by_ancestor(domain_id: int, env: dict[str, str] | None = None) -> bool:
    """Whether a parent process holds this domain's lease for us (its id in LEASED_ENV)."""
    ids = (os.environ if env is None else env).get(LEASED_ENV, "")
    return str(domain_id) in {i.strip() for i in ids.split(",")}


def with_leases(env: dict[str, str], domain_ids: list[int]) -> dict[str, str]:
    """`env` telling child processes that these domains' leases are held for them."""
    held = [i for i in env.get(LEASED_ENV, "").split(",") if i] + [str(d) for d in domain_ids]
    return {**env, LEASED_ENV: ",".join(dict.fromkeys(held))}


def lease_free_domain(rng: random.Random | None = None) -> DomainLease:
    """The lease of a domain id no sgvla process of this user holds and whose first two participants' ports are
    free on loopback."""
    ids = list(range(1, MAX_DOMAIN_ID + 1))
    (rng or random.Random()).shuffle(ids)
    for d in ids:
        lease = DomainLease(d)
        if lease.acquired and not held_ports(d, participants=2):
            return lease
        lease.release()
    raise RuntimeError(f"no free ROS domain id on this machine (all of 1..{MAX_DOMAIN_ID} in use)")


def port_owners(ports: list[int]) -> dict[int, list[int]]:
    """pid -> the ports among `ports` its UDP sockets are bound to, for the processes this user may look into."""
    inodes: dict[int, int] = {}
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            port = int(fields[1].rsplit(":", 1)[1], 16)
            if port in ports and fields[9] != "0":
                inodes[int(fields[9])] = port
    owners: dict[int, list[int]] = {}
    if not inodes:
        return owners
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fds = list((proc / "fd").iterdir())
        except OSError:  # another user's process, or gone
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:[") and int(target[8:-1]) in inodes:
                owners.setdefault(int(proc.name), []).append(inodes[int(target[8:-1])])
    return {pid: sorted(ports) for pid, ports in owners.items()}


def descendants(pids: set[int]) -> set[int]:
    """`pids` and every process below them (a node's own children: a simulated servo bus, say)."""
    children: dict[int, list[int]] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(proc.name))
    found, todo = set(), list(pids)
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo += children.get(pid, [])
    return found


def foreign_users(domain_id: int, ours: set[int]) -> str:
    """Who else holds the domain's ports once a launch's nodes (the processes `ours` and below) run on it: "" when
    nobody, else their pids and command lines. What another user runs is not visible and not reported."""
    ports = held_ports(domain_id)
    mine = descendants(ours)
    others = {pid: command_line(pid) for pid in port_owners(ports) if pid not in mine}
    return "; ".join(f"{pid} ({cmd})" for pid, cmd in sorted(others.items()))


def command_line(pid: int, width: int = 100) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    except OSError:
        return "?"
    text = " ".join([Path(argv[0].decode(errors="replace")).name] + [a.decode(errors="replace") for a in argv[1:]])
    return text if len(text) <= width else text[:width - 3] + "..."


def probe_nodes(domain_id: int, wait_s: float = PROBE_WAIT_S) -> tuple[list[str], str]:
    """(ROS nodes discovered on the domain, "" or why the probe failed): `sgvla_ros.domain_probe` in a child."""
    cmd = [sys.executable, "-m", "sgvla_ros.domain_probe", "--wait", str(wait_s)]
    try:
        out = subprocess.run(cmd, env=loopback_env(domain_id), capture_output=True, text=True,
                             timeout=PROBE_TIMEOUT_S + wait_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return [], f"the discovery probe did not finish within {PROBE_TIMEOUT_S + wait_s:.0f} s"
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        errors = out.stderr.strip().splitlines()
        return [], f"the discovery probe failed (exit {out.returncode}): {errors[-1] if errors else 'no output'}"
    return json.loads(lines[-1])["nodes"], ""


@dataclass(frozen=True)
class DomainUsers:
    """What is on a domain of this machine."""

    domain_id: int
    nodes: list[str] = field(default_factory=list)  # ROS nodes the probe discovered
    ports: list[int] = field(default_factory=list)  # the domain's UDP ports held on this machine
    processes: dict[int, str] = field(default_factory=dict)  # pid -> command line, of those holding them
    probe_error: str = ""

    @property
    def empty(self) -> bool:
        return not (self.nodes or self.ports)

    @property
    def participants(self) -> int:
        metatraffic = {participant_ports(self.domain_id, k)[0] for k in range(PARTICIPANTS)}
        return len(metatraffic & set(self.ports))

    def describe(self) -> str:
        parts = []
        if self.nodes:
            parts.append(f"ROS node(s) {', '.join(self.nodes)}")
        if self.processes:
            parts.append("process(es) " + "; ".join(f"{pid} ({cmd})" for pid, cmd in sorted(self.processes.items())))
        elif self.ports:
            parts.append(f"{self.participants} DDS participant(s) holding UDP port(s) "
                         f"{', '.join(map(str, self.ports[:6]))}{' ...' if len(self.ports) > 6 else ''} "
                         "(their processes are not visible to this user)")
        return "; ".join(parts) or "nobody"


def domain_users(domain_id: int) -> DomainUsers:
    """Ports first (instant), then the discovery probe."""
    ports = held_ports(domain_id)
    owners = port_owners(ports) if ports else {}
    nodes, error = probe_nodes(domain_id, BUSY_WAIT_S if ports else PROBE_WAIT_S)
    return DomainUsers(domain_id, nodes, ports, {pid: command_line(pid) for pid in owners}, error)
