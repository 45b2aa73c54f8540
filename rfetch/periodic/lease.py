"""The leader lease: one live worker process per Redis (per namespace) leads.

Sidekiq Enterprise's leader election, with three differences:

* The lease is a Redis hash with a token and a TTL counted by Redis (``leader_claim.lua``);
  every push of a periodic tick checks the token in the same Lua call, so a leader that
  froze past its TTL and lost the lease cannot push.
* The leader renews every third of the TTL (Sidekiq Enterprise: every 15 s). A follower
  looks again exactly when the lease it saw would run out (Sidekiq Enterprise: every 60 s),
  so a SIGKILLed leader is replaced within the TTL after its last renewal, and followers
  cost about two commands per TTL.
* A leader that is quieted or stopped gives the lease up at once (``leader_resign.lua``)
  and wakes one follower blocked on the wake list, which takes over within moments.

The lease's local view (:attr:`LeaderLease.is_leader`) is conservative: it ends a TTL after
the last successful claim was *sent*, which is before Redis started counting the TTL.
"""

from __future__ import annotations

import random
import secrets
import threading
import time
from collections.abc import Callable
from typing import Protocol

from rfetch.store.replies import LeaderClaim

ELECTED = 2
RENEWED = 1
FOLLOWER = 0
"""``LeaderClaim.status``: this call elected the caller, renewed its lease, or another
process leads."""

RENEWALS_PER_TTL = 3
"""The leader renews every ``leader_ttl / 3`` seconds: two renewals in a row may fail
(a network timeout, a Redis restart) before the lease runs out."""

FOLLOWER_JITTER = 0.25
"""Seconds of random delay added to a follower's look, so followers do not all claim at
the same instant when a lease runs out."""


class LeaseCommands(Protocol):
    """The Redis calls the lease makes (one typed function per Lua script)."""

    def claim(self, token: str, identity: str, ttl_ms: int) -> LeaderClaim:
        """Run ``leader_claim.lua``."""
        ...

    def resign(self, token: str, wake_ttl_ms: int) -> bool:
        """Run ``leader_resign.lua``; True when this token held the lease."""
        ...

    def wait_for_wake(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds on the wake list; True when woken."""
        ...


def new_token(identity: str) -> str:
    """A lease token: the identity and 16 random hex characters."""
    return f"{identity}#{secrets.token_hex(8)}"


class LeaderLease:
    """This process's side of the leader election.

    Args:
        commands: the Redis calls.
        identity: this process's identity (``host:pid:hex``).
        ttl: ``Config.leader_ttl``, seconds.
        monotonic: clock for the local view of the lease (seconds; tests pass a fake).
        wall: wall clock, epoch seconds (to follow Redis's clock between calls).
        rng: random source for the follower jitter.
    """

    def __init__(
        self,
        commands: LeaseCommands,
        identity: str,
        ttl: float,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        rng: random.Random | None = None,
    ) -> None:
        self.commands = commands
        self.identity = identity
        self.ttl = ttl
        self.token = new_token(identity)
        self._monotonic = monotonic
        self._wall = wall
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self._valid_until = float("-inf")
        self._renew_at = float("-inf")
        self._follow_until = float("-inf")
        self._offset = 0.0
        self._stopped = False
        self.holder = ""

    @property
    def is_leader(self) -> bool:
        """Whether this process leads now (conservatively: until a TTL after the last
        successful claim was sent)."""
        return not self._stopped and self._monotonic() < self._valid_until

    @property
    def stopped(self) -> bool:
        """Whether :meth:`step_down` was called: this process no longer takes part."""
        return self._stopped

    def redis_now(self) -> float:
        """Redis's clock (epoch seconds), followed by the offset measured at each claim."""
        return self._wall() + self._offset

    def claim_due(self) -> bool:
        """Whether it is time to claim: a leader's renewal, or a follower's next look."""
        now = self._monotonic()
        if self.is_leader:
            return now >= self._renew_at
        return now >= self._follow_until

    def seconds_to_claim(self) -> float:
        """Seconds until :meth:`claim_due` becomes true (0 if it is)."""
        target = self._renew_at if self.is_leader else self._follow_until
        return max(0.0, target - self._monotonic())

    def claim(self) -> LeaderClaim | None:
        """Claim or renew the lease once.

        Returns:
            The claim, or None after :meth:`step_down` (nothing is sent then).

        Raises:
            redis.exceptions.RedisError: Redis unreachable; the local view is unchanged,
                so a leader stays leader until its lease would run out.
        """
        with self._lock:
            if self._stopped:
                return None
            sent_mono, sent_wall = self._monotonic(), self._wall()
            result = self.commands.claim(self.token, self.identity, int(self.ttl * 1000))
            done_mono, done_wall = self._monotonic(), self._wall()
            self._offset = result.redis_time - (sent_wall + done_wall) / 2
            self.holder = result.holder
            if result.status == FOLLOWER:
                self._valid_until = float("-inf")
                jitter = self._rng.random() * FOLLOWER_JITTER
                self._follow_until = done_mono + min(result.remaining, self.ttl) + jitter
            else:
                self._valid_until = sent_mono + self.ttl
                self._renew_at = sent_mono + self.ttl / RENEWALS_PER_TTL
            return result

    def lost(self) -> None:
        """Forget the leadership at once: a push found that the token no longer holds the
        lease (it ran out during a freeze, or another process took it)."""
        with self._lock:
            self._valid_until = float("-inf")
            self._follow_until = float("-inf")

    def step_down(self) -> bool:
        """Leave the election for good (quiet, TERM) and give the lease up if held.

        Returns:
            True when this process held the lease and gave it up.

        Raises:
            redis.exceptions.RedisError: Redis unreachable; the lease then runs out by
                itself within the TTL, and this process no longer renews or pushes.
        """
        with self._lock:
            held = not self._stopped and self._monotonic() < self._valid_until
            self._stopped = True
            self._valid_until = float("-inf")
            if not held:
                return False
            return self.commands.resign(self.token, int(self.ttl * 1000))

    def wait_as_follower(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a leader to step down (its wake element).

        Returns:
            True when woken: the follower should claim now.
        """
        if timeout <= 0:
            return False
        woken = self.commands.wait_for_wake(timeout)
        if woken:
            with self._lock:
                self._follow_until = float("-inf")
        return woken
