"""The one scheduling loop: a plan's episodes over a `WorkerPool` (in process, worker processes or Ray actors),
yielded as they end with their record or the exception they ended with. The caller alone writes records.

Each free worker gets the next episode until `stop()` says the run is ending; the loop ends when every given episode
has ended. After an episode lost the policy server (`PolicyServerLost`) the server is checked and, when it is gone,
restarted before more episodes go out; when it cannot be, the episodes still to run are lost with it (each an
infrastructure failure the next run retries). `WorkerSetupError` (no episode can run) comes out of the loop.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator

from sgvla.core.episode import EpisodeKey
from sgvla.eval.pool import Outcome, WorkerPool
from sgvla.policies.serving.remote import PolicyServerLost


def schedule(pool: WorkerPool, todo: list[EpisodeKey], stop: Callable[[], bool]) -> Iterator[Outcome]:
    """Run `todo` on `pool` (started here; the caller closes it), yielding (episode, record or exception)."""
    if not todo:
        return
    pool.start()
    queue = deque(todo)
    running = 0
    check_server = False
    while queue or running:
        if check_server and pool.server is not None and not pool.server.alive():
            try:
                pool.server.restart()
            except RuntimeError as e:
                while queue:
                    yield queue.popleft(), PolicyServerLost(str(e))
        check_server = False
        while queue and pool.free() and not stop():
            if not pool.submit(queue[0]):
                break
            queue.popleft()
            running += 1
        if not running and (stop() or not queue):
            break
        for episode, outcome in pool.wait():
            running -= 1
            check_server = check_server or isinstance(outcome, PolicyServerLost)
            yield episode, outcome
