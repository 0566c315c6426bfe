"""What a run holds of its policy server, whatever runs it: a `ServerHandle` (`LocalServer`: a process of this
machine; `RayServer`: an actor of the cluster). The scheduler (`sgvla.eval.schedule`) supervises the server through
this alone: after an episode lost it (`PolicyServerLost`) it asks `alive()` and, when it is gone, `restart()`s it
before more episodes go out; the run reports its `stats()` and `stop()`s it at the end.
"""

from __future__ import annotations

from typing import Any, Protocol


class ServerHandle(Protocol):
    """A started policy server, supervised by the run that started it."""

    restarts: int  # how many times a lost server was replaced

    def alive(self) -> bool:
        """Whether the server still answers (a busy one does)."""

    def restart(self) -> None:
        """Replace a lost server; RuntimeError with the cause when the new one cannot build its policies."""

    def stats(self) -> dict[str, Any]:
        """The server's batching stats per served policy ({} when it is gone)."""

    def stop(self) -> None:
        """End the server (what it was serving is over)."""
