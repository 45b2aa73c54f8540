"""Limiters you call (Sidekiq Enterprise's rate limiters, Python form).

::

    stripe = rfetch.Limiter.window("stripe", 100, per=1.0)       # 100 per second, fixed window
    erp = rfetch.Limiter.concurrent("erp", 20, lock_timeout=60)   # at most 20 at once
    with stripe.within_limit():
        call_stripe()

Each limiter is one Redis hash, changed atomically by one Lua script per call (see
docs/flow-control.md). A limiter object holds no connection until its first call, so
limiters are built at import time; it is thread-safe and meant to be shared.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rfetch.errors import ConfigError, OverLimit
from rfetch.limiter import spec as specs
from rfetch.limiter.grant import POLL_CAP, POLL_FIRST, Grant, holder
from rfetch.limiter.locks import LockKeeper
from rfetch.push.client import DEFAULT
from rfetch.store.limiter_commands import Attempt, Definition, LimiterCommands

if TYPE_CHECKING:
    from rfetch.push.client import Client

class Limiter:
    """A limiter shared by every process on one Redis (and namespace).

    Build one with :meth:`window`, :meth:`bucket`, :meth:`leaky`, :meth:`points` or
    :meth:`concurrent`; they check every argument and raise :class:`rfetch.ConfigError`
    at once. The Redis connection is the default client's (``rfetch.configure``) unless
    ``client`` is given, taken at the first call.
    """

    def __init__(self, spec: specs.Spec, client: Client | None = None) -> None:
        self.spec = spec
        self._client = client
        self._commands: LimiterCommands | None = None
        self._lock = threading.Lock()
        self._keeper: LockKeeper | None = None
        if spec.kind == "concurrent":
            self._keeper = LockKeeper(spec.name, self._renew, spec.lock_timeout / 3)

    # -- construction (Sidekiq::Limiter.window / bucket / leaky / points / concurrent) -----

    @classmethod
    def window(
        cls,
        name: str,
        limit: int | str,
        per: float | str | None = None,
        *,
        wait_timeout: float = specs.DEFAULT_WAIT_TIMEOUT,
        ttl: float = specs.DEFAULT_TTL,
        reschedule: int = specs.DEFAULT_RESCHEDULE,
        backoff: specs.Backoff | None = None,
        client: Client | None = None,
    ) -> Limiter:
        """At most ``limit`` calls per fixed window of ``per`` seconds (default 1), windows
        aligned on Redis's clock (Sidekiq Enterprise's bucket limiter). A refused call
        waits for the next window.

        Args:
            name: letters, digits, ``-`` and ``_`` (dynamic names: ``f"stripe-{user}"``).
            limit: calls per window, or a rate string (``"100/s"``) without ``per``.
            per: seconds (float) or a unit (``"second"``, ``"minute"``, ``"5m"``).
            wait_timeout: seconds to wait for capacity before ``OverLimit`` (0: none).
            ttl: seconds the limiter's Redis hash lives after its last call.
            reschedule: over-limit reschedules of a job before it fails normally.
            backoff: ``backoff(count, job) -> seconds`` before reschedule ``count``.
            client: the rfetch Client whose Redis and namespace to use.

        Raises:
            ConfigError: a bad name, limit, period or option.
        """
        return cls(specs.build("window", name, limit, per, wait_timeout=wait_timeout, ttl=ttl,
                               reschedule=reschedule, backoff=backoff), client)

    @classmethod
    def bucket(
        cls,
        name: str,
        limit: int | str,
        per: float | str | None = None,
        *,
        wait_timeout: float = specs.DEFAULT_WAIT_TIMEOUT,
        ttl: float = specs.DEFAULT_TTL,
        reschedule: int = specs.DEFAULT_RESCHEDULE,
        backoff: specs.Backoff | None = None,
        client: Client | None = None,
    ) -> Limiter:
        """A token bucket: ``limit`` tokens, refilled continuously at ``limit`` per ``per``
        seconds; a burst of ``limit`` calls, then that rate. Arguments as :meth:`window`.

        Raises:
            ConfigError: a bad name, limit, period or option.
        """
        return cls(specs.build("bucket", name, limit, per, wait_timeout=wait_timeout, ttl=ttl,
                               reschedule=reschedule, backoff=backoff), client)

    @classmethod
    def leaky(
        cls,
        name: str,
        limit: int | str,
        per: float | str | None = None,
        *,
        burst: int = 1,
        wait_timeout: float = specs.DEFAULT_WAIT_TIMEOUT,
        ttl: float = specs.DEFAULT_TTL,
        reschedule: int = specs.DEFAULT_RESCHEDULE,
        backoff: specs.Backoff | None = None,
        client: Client | None = None,
    ) -> Limiter:
        """A leaky bucket: a smooth rate of ``limit`` per ``per`` seconds, calls spaced
        ``per / limit`` apart after the first ``burst`` (default 1). Other arguments as
        :meth:`window`.

        Raises:
            ConfigError: a bad name, limit, period, burst or option.
        """
        return cls(specs.build("leaky", name, limit, per, wait_timeout=wait_timeout, ttl=ttl,
                               reschedule=reschedule, backoff=backoff, burst=burst), client)

    @classmethod
    def points(
        cls,
        name: str,
        limit: int | str,
        per: float | str | None = None,
        *,
        wait_timeout: float = specs.DEFAULT_WAIT_TIMEOUT,
        ttl: float = specs.DEFAULT_TTL,
        reschedule: int = specs.DEFAULT_RESCHEDULE,
        backoff: specs.Backoff | None = None,
        client: Client | None = None,
    ) -> Limiter:
        """A points budget (GitHub's and Shopify's GraphQL cost limits): ``limit`` points,
        refilled continuously at ``limit`` per ``per`` seconds; each call names its cost
        (``within_limit(cost=25)``). Other arguments as :meth:`window`.

        Raises:
            ConfigError: a bad name, limit, period or option.
        """
        return cls(specs.build("points", name, limit, per, wait_timeout=wait_timeout, ttl=ttl,
                               reschedule=reschedule, backoff=backoff), client)

    @classmethod
    def concurrent(
        cls,
        name: str,
        limit: int,
        *,
        lock_timeout: float = 30.0,
        wait_timeout: float = specs.DEFAULT_WAIT_TIMEOUT,
        ttl: float = specs.DEFAULT_TTL,
        reschedule: int = specs.DEFAULT_RESCHEDULE,
        backoff: specs.Backoff | None = None,
        client: Client | None = None,
    ) -> Limiter:
        """At most ``limit`` blocks running at once across every process (Sidekiq
        Enterprise's concurrent limiter; a limit of 1 is a distributed mutex).

        A holder renews its lock every ``lock_timeout / 3`` seconds while its block runs;
        the lock of a holder that stops renewing (killed, stopped) is reclaimed
        ``lock_timeout`` seconds after its last renewal, never earlier. Other arguments as
        :meth:`window`.

        Raises:
            ConfigError: a bad name, limit, lock_timeout or option.
        """
        return cls(specs.build("concurrent", name, limit, None, wait_timeout=wait_timeout,
                               ttl=ttl, reschedule=reschedule, backoff=backoff,
                               lock_timeout=lock_timeout), client)

    # -- use -------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The limiter's name."""
        return self.spec.name

    def within_limit(self, cost: int = 1) -> Within:
        """Run the block within the limit: wait for capacity up to ``wait_timeout``
        seconds, then raise :class:`rfetch.OverLimit` (Sidekiq Enterprise's
        ``within_limit``). ``with limiter.within_limit() as grant:`` in threads;
        ``async with limiter.within_limit():`` in async jobs (the attempts run in the
        loop's executor and the waits are ``asyncio.sleep``, so the loop never blocks). A
        concurrent limiter's lock is released when the block ends, however it ends; a rate
        limiter's grant is spent at entry.

        Args:
            cost: units this call takes (points limiter; 1 for the other kinds).

        Raises (at entry):
            OverLimit: no capacity within ``wait_timeout``.
            ConfigError: a cost that is not a positive integer within the capacity.
            rfetch.errors.LimiterKeyError: the limiter's Redis key has another type.
            redis.exceptions.RedisError: Redis unreachable.
        """
        return Within(self, cost)

    def acquire(self, cost: int = 1) -> Grant:
        """Take capacity without a ``with`` block (release a concurrent limiter's lock
        with :meth:`release`). Raises as :meth:`within_limit`."""
        started = time.monotonic()
        token = uuid.uuid4().hex if self._keeper is not None else None
        attempts = 0
        while True:
            waited = time.monotonic() - started if attempts else 0.0  # the first never waited
            sent_at = time.time()
            attempt = self._attempt(cost, token, waited)
            if attempt.granted:
                return self._granted(attempt, waited, sent_at, token)
            attempts += 1
            time.sleep(self._pause(attempt, attempts, waited))

    async def aacquire(self, cost: int = 1) -> Grant:
        """:meth:`acquire` for asyncio code: attempts in the loop's executor, waits with
        ``asyncio.sleep``."""
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        token = uuid.uuid4().hex if self._keeper is not None else None
        attempts = 0
        while True:
            waited = time.monotonic() - started if attempts else 0.0  # the first never waited
            sent_at = time.time()
            attempt = await loop.run_in_executor(None, self._attempt, cost, token, waited)
            if attempt.granted:
                return self._granted(attempt, waited, sent_at, token)
            attempts += 1
            await asyncio.sleep(self._pause(attempt, attempts, waited))

    def release(self, grant: Grant) -> None:
        """Release a concurrent limiter's lock (nothing for the rate kinds). A lock already
        reclaimed is logged by nobody: its holder learnt it at its last renewal."""
        if grant.token is None or self._keeper is None:
            return
        self._keeper.discard(grant.token)
        self._store().release(self._definition(), grant.token)

    # -- internals ---------------------------------------------------------------------------

    def _attempt(self, cost: int, token: str | None, waited: float) -> Attempt:
        spec = self.spec
        if spec.kind != "points" and cost != 1:
            raise ConfigError(f"limiter {spec.name}: only a points limiter takes a cost")
        if isinstance(cost, bool) or not isinstance(cost, int) or not 1 <= cost <= spec.capacity:
            raise ConfigError(
                f"limiter {spec.name}: cost must be an integer from 1 to {spec.capacity}, "
                f"got {cost!r}"
            )
        budget_ms = int((spec.wait_timeout - waited) * 1000)
        waited_ms = int(waited * 1000)
        store, d = self._store(), self._definition()
        if spec.kind == "window":
            return store.window(d, budget_ms, waited_ms)
        if token is not None:
            return store.acquire(d, token, holder(), int(spec.lock_timeout * 1000), budget_ms,
                                 waited_ms)
        return store.rate(d, spec.capacity, cost, budget_ms, waited_ms)

    def _granted(
        self, attempt: Attempt, waited: float, sent_at: float, token: str | None
    ) -> Grant:
        if token is not None and self._keeper is not None:
            self._keeper.add(token)
        return Grant(self.spec.name, waited, attempt.used, attempt.now_ms, sent_at, token)

    def _pause(self, attempt: Attempt, attempts: int, waited: float) -> float:
        """Seconds to sleep before the next attempt; raises OverLimit when the script said
        the wait budget cannot cover it."""
        spec = self.spec
        if attempt.status < 0:
            raise OverLimit(
                f"limiter {spec.name} ({spec.kind}, limit {spec.limit}) had no capacity "
                f"within wait_timeout={spec.wait_timeout:g} s",
                spec.name,
                spec.kind,
                waited,
                spec.reschedule,
                spec.backoff,
            )
        left = max(spec.wait_timeout - waited, 0.0)
        pause = attempt.wait_ms / 1000
        if spec.kind == "concurrent":  # a release is not announced: poll, faster at first
            pause = min(pause, POLL_FIRST * 2 ** min(attempts - 1, 8), POLL_CAP)
        return min(pause, left)

    def _renew(self, tokens: Sequence[str]) -> list[str]:
        return self._store().renew(
            self._definition(), list(tokens), int(self.spec.lock_timeout * 1000)
        )

    def _definition(self) -> Definition:
        spec = self.spec
        return Definition(spec.name, spec.kind, spec.limit, round(spec.period * 1000),
                          round(spec.ttl * 1000))

    def _store(self) -> LimiterCommands:
        with self._lock:
            if self._commands is None:
                client = self._client
                if client is None:
                    client = DEFAULT.get()
                self._commands = LimiterCommands(client.redis, client.keys)
            return self._commands

    def __repr__(self) -> str:
        spec = self.spec
        return f"<Limiter {spec.kind} {spec.name!r} limit={spec.limit} period={spec.period:g}s>"


class Within:
    """The block of :meth:`Limiter.within_limit`, for ``with`` and ``async with``; its
    ``as`` target is the :class:`Grant`."""

    def __init__(self, limiter: Limiter, cost: int) -> None:
        self.limiter = limiter
        self.cost = cost
        self.grant: Grant | None = None

    def __enter__(self) -> Grant:
        self.grant = self.limiter.acquire(self.cost)
        return self.grant

    def __exit__(self, *exc_info: object) -> None:
        if self.grant is not None:
            self.limiter.release(self.grant)

    async def __aenter__(self) -> Grant:
        self.grant = await self.limiter.aacquire(self.cost)
        return self.grant

    async def __aexit__(self, *exc_info: object) -> None:
        if self.grant is not None:
            await asyncio.get_running_loop().run_in_executor(
                None, self.limiter.release, self.grant
            )
