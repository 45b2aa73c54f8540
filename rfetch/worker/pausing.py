"""Queue pausing, worker side: which queues this process must not take jobs from.

The admin side (``rfetch.api``) adds a queue to the ``paused`` set and publishes on
``rfetch:pause``. Each worker keeps the set in memory, re-reads it whenever a message
arrives and whenever its subscription is (re)established, so a pause takes effect within
milliseconds and costs an idle worker no command at all (a subscribed connection only
listens: the idle-cost budget).

The same subscription carries the cancel announcements (``rfetch:cancel``) to the worker's
:class:`~rfetch.worker.cancels.CancelMarks`, which reads its whole index again each time
the subscription is made.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from rfetch.guard import ThreadGuard
from rfetch.worker.cancels import CancelMarks
from rfetch.worker.context import WorkerContext

log = logging.getLogger("rfetch.pausing")


class PauseWatcher:
    """Keeps the set of paused queues up to date.

    Args:
        context: key names of the namespace and the client (one pooled connection is used
            for the subscription).
        on_change: called with the new set of paused queue names when it changes.
        cancels: also told the jids announced on ``rfetch:cancel`` (None: not listened to).
    """

    def __init__(
        self,
        context: WorkerContext,
        on_change: Callable[[frozenset[str]], None] | None = None,
        cancels: CancelMarks | None = None,
    ) -> None:
        redis = context.redis
        self.keys = context.keys
        self.cancels = cancels
        self.redis = redis
        self.on_change = on_change
        self._paused: frozenset[str] = frozenset()
        self.guard = ThreadGuard("pause watcher", log, redis=redis, first=1.0, cap=10.0)

    def paused(self) -> frozenset[str]:
        """Queue names paused now (as last read; no round trip)."""
        return self._paused

    def refresh(self) -> frozenset[str]:
        """Read the ``paused`` set from Redis (one SMEMBERS)."""
        names = frozenset(
            m.decode() if isinstance(m, bytes) else str(m)
            for m in self.redis.smembers(self.keys.paused)
        )
        if names != self._paused:
            self._paused = names
            log.info("paused queues: %s", ", ".join(sorted(names)) or "none")
            if self.on_change is not None:
                self.on_change(names)
        return names

    def run(self, stop: threading.Event) -> None:
        """Listen for pause announcements until ``stop`` is set. On any error the
        subscription is dropped and made again after a back-off (1 s doubling to 10 s);
        a successful re-read of the set ends the streak."""
        while not stop.is_set():
            pubsub = self.redis.pubsub()  # type: ignore[no-untyped-call]
            try:
                channels = [self.keys.pause_channel]
                if self.cancels is not None:
                    channels.append(self.keys.cancel_channel)
                pubsub.subscribe(*channels)
                while not stop.is_set():
                    message = pubsub.get_message(timeout=1.0)
                    if message is not None and message["type"] in ("subscribe", "message"):
                        self._heard(message)
                        self.guard.succeeded()
            except Exception as exc:
                stop.wait(self.guard.failed(exc))
            finally:
                with contextlib.suppress(Exception):  # closing a broken connection may raise
                    pubsub.close()

    def _heard(self, message: dict[str, Any]) -> None:
        """A subscription made, or an announcement: pause, or cancel."""
        channel = message["channel"]
        name = channel.decode() if isinstance(channel, bytes) else str(channel)
        if self.cancels is None or name != self.keys.cancel_channel:
            self.refresh()
        elif message["type"] == "subscribe":
            self.cancels.reload()
        else:
            self.cancels.note(message["data"])
