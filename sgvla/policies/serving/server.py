"""A policy server: one copy of each policy's weights serving many simulator workers, their steps batched.

Workers run episodes; every step of a served policy is a call here (`PolicyServer.call`) from a `RemotePolicy`
(sgvla.policies.serving.remote). Each policy has a host thread that gathers the `act` calls of concurrent episodes into
one `BatchPolicy.act_batch` (one forward pass): it starts a batch at the first waiting call and closes it when
`max_batch` calls wait, when every open episode of the policy is waiting, or `max_wait_ms` after the first came,
whichever is first. Each episode is a session of the policy (its own action queue, prompt and noise), opened by
its `reset`, so sharing a batch never mixes episodes.

How calls reach the server is the transport's business: `LocalServer` runs one in a process of its own behind a
Unix socket (sgvla.policies.serving.local); a Ray actor holds one for a cluster (sgvla.policies.serving.ray).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sgvla.core.protocols import BatchPolicy, PolicyGaveUp, StepInput

log = logging.getLogger(__name__)

METHODS = ("reset", "act", "budget", "decision", "close")


@dataclass
class _Request:
    session: Any
    step: StepInput
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: BaseException | None = None


class _Host:
    """One policy's model and its batching thread. Every call into the policy holds `_lock` (policies are not
    thread-safe); the batching thread is the only one that calls `act_batch`."""

    def __init__(self, policy: BatchPolicy, max_batch: int, max_wait_s: float):
        self.policy, self.max_batch, self.max_wait_s = policy, max_batch, max_wait_s
        self.sessions: dict[str, Any] = {}
        self._unopened: Any = None  # a session never reset: counts prompts before an episode's reset (`budget`)
        self.batch_sizes: Counter = Counter()
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._pending: list[_Request] = []
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name=f"policy-{policy.name}", daemon=True)
        self._thread.start()

    def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        with self._lock:
            return fn(*args)

    def fresh_budget(self, prompt: str) -> Any:
        """The prompt budget as a session that was never reset counts it (zero state): what the episode engine asks
        for while it builds its first prompt, before `reset` opens the episode's session. Call under `run`."""
        if self._unopened is None:
            self._unopened = self.policy.open_session()
        return self.policy.session_budget(self._unopened, prompt)

    def act(self, session: Any, step: StepInput) -> Any:
        request = _Request(session, step)
        with self._cond:
            if self._closed:
                raise RuntimeError(f"policy {self.policy.name}: the server is closing")
            self._pending.append(request)
            self._cond.notify_all()
        request.done.wait()
        if request.error is not None:
            raise request.error
        return request.result

    def _take(self) -> list[_Request] | None:
        """The next batch (see the module docstring), or None when closed."""
        with self._cond:
            while not self._pending and not self._closed:
                self._cond.wait()
            if self._closed:
                return None
            deadline = time.monotonic() + self.max_wait_s
            while len(self._pending) < min(self.max_batch, max(len(self.sessions), 1)):
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    break
                self._cond.wait(left)
            batch, self._pending = self._pending[:self.max_batch], self._pending[self.max_batch:]
            return batch

    def _loop(self) -> None:
        while (batch := self._take()) is not None:
            try:
                with self._lock:
                    results = self.policy.act_batch([r.session for r in batch], [r.step for r in batch])
                for request, result in zip(batch, results, strict=True):
                    if isinstance(result, PolicyGaveUp):
                        request.error = result
                    else:
                        request.result = result
            except BaseException as e:  # the whole batch failed: each of its episodes hears why
                for request in batch:
                    request.error = e
            self.batch_sizes[len(batch)] += 1
            for request in batch:
                request.done.set()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            pending, self._pending = self._pending, []
            self._cond.notify_all()
        for request in pending:
            request.error = RuntimeError(f"policy {self.policy.name}: the server closed")
            request.done.set()
        self._thread.join(timeout=30)
        with self._lock:
            for session in self.sessions.values():
                self.policy.close_session(session)
            self.sessions.clear()
            if self._unopened is not None:
                self.policy.close_session(self._unopened)
                self._unopened = None
            self.policy.close()


class PolicyServer:
    """The policies of a plan by name, each built once (`builders`: name -> a `BatchPolicy` factory), serving
    sessions named by their callers. `controller_factory` is the suite's pick-and-place controller factory, which
    scripted policies' steps carry in `info["pick_place"]` (a worker's own stays with its simulator)."""

    def __init__(self, builders: Mapping[str, Callable[[], BatchPolicy]], *, max_batch: int = 8,
                 max_wait_ms: float = 30.0, controller_factory: Callable[[str, str], Any] | None = None):
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        if max_wait_ms < 0:
            raise ValueError(f"max_wait_ms must be >= 0, got {max_wait_ms}")
        self.controller_factory = controller_factory
        self._hosts: dict[str, _Host] = {}
        try:
            for name, build in builders.items():
                self._hosts[name] = _Host(build(), max_batch, max_wait_ms / 1000)
        except BaseException:
            self.close()
            raise

    @property
    def policies(self) -> list[str]:
        return list(self._hosts)

    def call(self, policy: str, session: str, method: str, *args: Any) -> Any:
        """One call of a `RemotePolicy`: `reset(prompt, seed)` (opens the session anew), `act(step)`,
        `budget(prompt)`, `decision()`, `close()`. Raises what the policy raised (PolicyGaveUp included). `budget`
        needs no open session (a context mode counts tokens before the episode's `reset`: a fresh session counts)."""
        host = self._hosts.get(policy)
        if host is None:
            raise KeyError(f"this policy server serves {self.policies}, not {policy!r}")
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r}; one of {METHODS}")
        if method == "reset":
            return self._reset(host, session, *args)
        if method == "close":
            state = host.sessions.pop(session, None)
            return None if state is None else host.run(host.policy.close_session, state)
        state = host.sessions.get(session)
        if state is None and method == "budget":
            return host.run(host.fresh_budget, *args)
        if state is None:
            raise KeyError(f"policy {policy}: no session {session!r} (reset() opens one; a restarted server has "
                           "none of its predecessor's)")
        if method == "act":
            return host.act(state, self._with_controller(args[0]))
        if method == "budget":
            return host.run(host.policy.session_budget, state, *args)
        return host.run(host.policy.session_decision, state)

    def _reset(self, host: _Host, session: str, prompt: str, seed: int | None) -> None:
        def reopen() -> None:
            old = host.sessions.pop(session, None)
            if old is not None:
                host.policy.close_session(old)
            state = host.policy.open_session()
            host.policy.reset_session(state, prompt, seed)
            with host._cond:  # the batching thread counts open sessions
                host.sessions[session] = state
        host.run(reopen)

    def _with_controller(self, step: StepInput) -> StepInput:
        if self.controller_factory is None or "pick_place" in step.info:
            return step
        return StepInput(step.observation, step.prompt, step.scene, {**step.info, "pick_place": self.controller_factory})

    def close_sessions(self, sessions: list[tuple[str, str]]) -> None:
        """Close (policy, session) pairs whose caller is gone (a worker died without closing them)."""
        for policy, session in sessions:
            host = self._hosts.get(policy)
            state = host.sessions.pop(session, None) if host else None
            if state is not None:
                host.run(host.policy.close_session, state)

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per policy: batches run, steps served and the batch sizes formed ({size: count})."""
        out = {}
        for name, host in self._hosts.items():
            sizes = dict(sorted(host.batch_sizes.items()))
            out[name] = {"batches": sum(sizes.values()), "steps": sum(k * v for k, v in sizes.items()),
                         "batch_sizes": sizes, "open_sessions": len(host.sessions)}
        return out

    def close(self) -> None:
        for host in self._hosts.values():
            try:
                host.close()
            except Exception:
                log.warning("closing policy %s failed", host.policy.name, exc_info=True)
        self._hosts.clear()
