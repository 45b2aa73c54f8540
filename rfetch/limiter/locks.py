"""The locks a process holds on one concurrent limiter, and the thread that renews them.

Sidekiq Enterprise asks that a block run shorter than ``lock_timeout``, after which another
process may take the lock even from a live holder. rfetch renews instead: while a process
holds a lock, one thread per limiter instance pushes its expiry to ``lock_timeout`` from
now every ``lock_timeout / 3`` seconds, so a live holder keeps its lock however long its
block runs, and a holder that stopped renewing (killed, or stopped by SIGSTOP, a debugger,
a VM pause) loses it ``lock_timeout`` after its last renewal. The thread ends once the
process has held no lock of that limiter for a whole interval (so a limiter used call
after call keeps one thread instead of starting one per call).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from rfetch.guard import ThreadGuard

log = logging.getLogger("rfetch.limiter")


class LockKeeper:
    """The tokens of the locks this process holds on one limiter, renewed in the background.

    Args:
        name: the limiter's name (thread name and log lines).
        renew: renews the given tokens; returns those no longer held (reclaimed).
        interval: seconds between renewals (``lock_timeout / 3``).
    """

    def __init__(
        self, name: str, renew: Callable[[Sequence[str]], list[str]], interval: float
    ) -> None:
        self.name = name
        self.renew = renew
        self.interval = interval
        self._lock = threading.Lock()
        self._held: set[str] = set()
        self._thread: threading.Thread | None = None

    def held(self) -> list[str]:
        """The tokens held now."""
        with self._lock:
            return sorted(self._held)

    def add(self, token: str) -> None:
        """Note a lock just acquired, and start the renewing thread if none runs."""
        with self._lock:
            self._held.add(token)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"rfetch-limiter-{self.name}", daemon=True
                )
                self._thread.start()

    def discard(self, token: str) -> None:
        """Forget a released lock (the thread ends at its next turn if none is left)."""
        with self._lock:
            self._held.discard(token)

    def _run(self) -> None:
        guard = ThreadGuard(f"limiter {self.name} lock renewal", log)
        delay = self.interval
        try:
            while True:
                time.sleep(delay)
                with self._lock:
                    tokens = sorted(self._held)
                    if not tokens:
                        self._thread = None
                        return
                try:
                    self._renew_once(tokens)
                except Exception as exc:  # Redis away, a bug: try again soon, the lock lives on
                    delay = min(guard.failed(exc), self.interval)
                    continue
                guard.succeeded()
                delay = self.interval
        finally:
            with self._lock:  # however it ended, the next lock taken starts a new thread
                if self._thread is threading.current_thread():
                    self._thread = None

    def _renew_once(self, tokens: list[str]) -> None:
        lost = self.renew(tokens)
        with self._lock:  # told once: a lost lock is no longer renewed
            self._held.difference_update(lost)
        for token in lost:
            log.error(
                "limiter %s: lock %s was reclaimed while held (this process did not "
                "renew it for lock_timeout: stopped or cut off from Redis)",
                self.name,
                token,
            )
