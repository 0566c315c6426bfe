"""The local transport of a policy server: the server in a process of its own behind a Unix socket in a private
temporary folder (`LocalServer`, the local executor's server handle), and a worker's connection to it
(`LocalEndpoint`, `LocalClient`).
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import get_context
from multiprocessing.connection import Client, Connection, Listener
from pathlib import Path
from typing import Any

from sgvla.core.processes import die_with_parent
from sgvla.policies.serving.remote import answer, call_server

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LocalEndpoint:
    """Where a local policy server listens (picklable: workers get it and connect)."""

    address: str
    authkey: bytes

    def client(self) -> LocalClient:
        return LocalClient(self)


class LocalClient:
    """One worker's connection to a local policy server, opened at the first call and again after a loss."""

    def __init__(self, endpoint: LocalEndpoint):
        self.endpoint = endpoint
        self._conn: Connection | None = None

    def call(self, policy: str, session: str, method: str, *args: Any) -> Any:
        return call_server(lambda: self._exchange((policy, session, method, args)), self.close, (OSError, EOFError),
                           self.endpoint.address, method)

    def _exchange(self, message: tuple) -> tuple[str, Any]:
        if self._conn is None:
            self._conn = Client(self.endpoint.address, family="AF_UNIX", authkey=self.endpoint.authkey)
        self._conn.send(message)
        return self._conn.recv()

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except OSError:
                pass
            self._conn = None


def _connection(server: Any, conn: Connection) -> None:
    opened: set[tuple[str, str]] = set()
    try:
        while True:
            try:
                policy, session, method, args = conn.recv()
            except (EOFError, OSError):
                return
            opened.add((policy, session))
            conn.send(answer(server, policy, session, method, args))
    finally:
        server.close_sessions(sorted(opened))  # the worker is gone: its episodes with it
        conn.close()


def _serve(build: Callable[[], Any], endpoint: LocalEndpoint, ready: Connection, parent: int) -> None:
    if not die_with_parent(signal.SIGKILL):
        log.warning("no prctl: the policy server will not end with its parent")
    if os.getppid() != parent:
        os._exit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's; the server ends with it
    try:
        server = build()
        listener = Listener(endpoint.address, family="AF_UNIX", authkey=endpoint.authkey)
    except BaseException as e:
        ready.send(("error", f"{type(e).__name__}: {e}"))
        return
    ready.send(("ok", server.policies))
    threading.Thread(target=_report_stats, args=(server, ready), daemon=True).start()
    while True:
        try:
            conn = listener.accept()
        except (OSError, EOFError):  # a client that failed the handshake
            continue
        threading.Thread(target=_connection, args=(server, conn), daemon=True).start()


def _report_stats(server: Any, pipe: Connection) -> None:
    """Answer the parent's requests for the server's stats; end the process when the parent's pipe closes."""
    while True:
        try:
            pipe.recv()
            pipe.send(server.stats())
        except (EOFError, OSError):
            os._exit(0)


class LocalServer:
    """A policy server in a process of its own (spawned, ending with this process), listening on a Unix socket in
    a private temporary folder: a `ServerHandle`. `restart()` starts a new one on the same endpoint after a loss."""

    def __init__(self, build: Callable[[], Any], start_timeout_s: float = 900.0):
        self.build, self.start_timeout_s = build, start_timeout_s
        self._folder = Path(tempfile.mkdtemp(prefix="sgvla_policy_server_"))
        self.endpoint = LocalEndpoint(str(self._folder / "socket"), secrets.token_bytes(16))
        self.process = self._pipe = None
        self.policies: list[str] = []
        self.restarts = 0

    def start(self) -> LocalServer:
        """Start the server and wait until its policies are built; RuntimeError with the cause when they fail."""
        Path(self.endpoint.address).unlink(missing_ok=True)
        ctx = get_context("spawn")
        self._pipe, theirs = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(self.build, self.endpoint, theirs, os.getpid()),
                                   name="sgvla-policy-server", daemon=True)
        self.process.start()
        theirs.close()
        if not self._pipe.poll(self.start_timeout_s):
            self.stop()
            raise RuntimeError(f"the policy server did not start within {self.start_timeout_s:.0f} s")
        try:
            status, payload = self._pipe.recv()
        except EOFError:
            self.process.join(5)
            code = self.process.exitcode
            raise RuntimeError(f"the policy server ended while starting (exit {code})") from None
        if status != "ok":
            self.stop()
            raise RuntimeError(f"the policy server could not build its policies: {payload}")
        self.policies = payload
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.is_alive()

    def restart(self) -> None:
        self.stop(remove=False)
        self.restarts += 1
        log.warning("the policy server was lost; starting a new one (restart %d)", self.restarts)
        self.start()

    def stats(self) -> dict[str, Any]:
        """The server's batching stats ({} when it is gone)."""
        try:
            self._pipe.send("stats")
            return self._pipe.recv() if self._pipe.poll(30) else {}
        except (OSError, EOFError, AttributeError):
            return {}

    def stop(self, remove: bool = True) -> None:
        if self._pipe is not None:
            self._pipe.close()
            self._pipe = None
        if self.process is not None:
            self.process.join(5)
            if self.process.is_alive():
                self.process.kill()
                self.process.join(5)
            self.process = None
        if remove:
            shutil.rmtree(self._folder, ignore_errors=True)

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
