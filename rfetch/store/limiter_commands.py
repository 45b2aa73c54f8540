"""One typed call per limiter script (``rfetch/lua/limiter_*.lua``): the only code that
knows their KEYS and ARGV order.

Every limiter script takes two keys, the limiter's hash and the registry set of limiter
names, both under the namespace (one Redis Cluster slot with a ``{tag}`` namespace), and
the common ARGV of ``lua/lib/limiter.lua``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis import Redis
from redis.commands.core import Script
from redis.exceptions import ResponseError

from rfetch.errors import LimiterKeyError
from rfetch.store.keys import Keys
from rfetch.store.scripts import LimiterScripts


@dataclass(frozen=True, slots=True)
class Definition:
    """What every limiter call sends: the limiter's name, kind, limit, period and TTL.

    Attributes:
        name: the limiter's name (letters, digits, ``-``, ``_``).
        kind: ``window``, ``bucket``, ``leaky``, ``points`` or ``concurrent``.
        limit: grants (or points, or locks) allowed.
        period_ms: the period in milliseconds (0 for the concurrent kind).
        ttl_ms: the hash expires after this many ms without a call.
    """

    name: str
    kind: str
    limit: int
    period_ms: int
    ttl_ms: int


@dataclass(frozen=True, slots=True)
class Attempt:
    """The reply of one attempt.

    Attributes:
        status: 1 granted; 0 refused, ask again after ``wait_ms``; -1 refused and the wait
            budget cannot cover the wait (counted as over the limit in Redis).
        wait_ms: milliseconds to wait before asking again (0 when granted).
        used: the limiter's use after this attempt (grants in the window, units in the
            bucket, locks held).
        now_ms: Redis's clock at the attempt, epoch milliseconds.
    """

    status: int
    wait_ms: int
    used: int
    now_ms: float

    @property
    def granted(self) -> bool:
        """Whether the attempt was granted."""
        return self.status == 1


def _attempt(reply: Any) -> Attempt:
    status, wait, used, now = reply
    return Attempt(int(status), int(wait), int(used), float(now))


class LimiterCommands:
    """The limiter scripts on one Redis client.

    Args:
        redis: the client (a Redis Cluster client works: both keys share a slot when the
            namespace has a ``{tag}``).
        keys: key names of the namespace.

    Every method raises :class:`rfetch.errors.LimiterKeyError` (naming the key) when the
    limiter's hash or the registry set exists with another type, and redis-py's errors
    when Redis cannot be reached.
    """

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys
        self.scripts = LimiterScripts.load(redis)

    def _keys(self, name: str) -> list[str]:
        return [self.keys.limiter(name), self.keys.limiters]

    @staticmethod
    def _argv(d: Definition, budget_ms: int, waited_ms: int) -> list[str | int]:
        return [d.name, d.kind, d.limit, d.period_ms, d.ttl_ms, max(budget_ms, 0), waited_ms]

    def window(self, d: Definition, budget_ms: int, waited_ms: int) -> Attempt:
        """``limiter_window.lua``: one grant of a fixed window, if the window has room.

        Args:
            d: the limiter.
            budget_ms: milliseconds left of the caller's wait budget.
            waited_ms: milliseconds the caller already waited (counted on a grant).
        """
        script = self.scripts.limiter_window
        return _attempt(self._run(script, d.name, self._argv(d, budget_ms, waited_ms)))

    def rate(
        self, d: Definition, capacity: int, cost: int, budget_ms: int, waited_ms: int
    ) -> Attempt:
        """``limiter_rate.lua``: take ``cost`` units from a token bucket, leaky bucket or
        points limiter holding ``capacity`` units, if it has room."""
        args = [*self._argv(d, budget_ms, waited_ms), capacity, cost]
        return _attempt(self._run(self.scripts.limiter_rate, d.name, args))

    def acquire(
        self,
        d: Definition,
        token: str,
        holder: str,
        lock_timeout_ms: int,
        budget_ms: int,
        waited_ms: int,
    ) -> Attempt:
        """``limiter_concurrent.lua`` acquire: take a lock named ``token`` (held by
        ``holder``, expiring ``lock_timeout_ms`` after now unless renewed), if fewer than
        the limit are held; expired locks are reclaimed first."""
        args = [*self._argv(d, budget_ms, waited_ms), "acquire", lock_timeout_ms, holder, token]
        return _attempt(self._run(self.scripts.limiter_concurrent, d.name, args))

    def release(self, d: Definition, token: str) -> bool:
        """``limiter_concurrent.lua`` release: drop the lock ``token``; False when it had
        already been reclaimed (its holder stopped renewing for ``lock_timeout``)."""
        args = [*self._argv(d, 0, 0), "release", 0, "", token]
        return bool(self._run(self.scripts.limiter_concurrent, d.name, args))

    def renew(self, d: Definition, tokens: Sequence[str], lock_timeout_ms: int) -> list[str]:
        """``limiter_concurrent.lua`` renew: push the expiry of the locks ``tokens`` to
        ``lock_timeout_ms`` after now. Returns the tokens no longer held (reclaimed)."""
        args = [*self._argv(d, 0, 0), "renew", lock_timeout_ms, "", *tokens]
        lost = self._run(self.scripts.limiter_concurrent, d.name, args)
        return [t.decode() if isinstance(t, bytes) else str(t) for t in lost]

    def _run(self, script: Script, name: str, args: Sequence[str | int]) -> Any:
        try:
            return script(keys=self._keys(name), args=args, client=self.redis)
        except ResponseError as exc:
            if "WRONGTYPE" in str(exc):
                raise LimiterKeyError(f"limiter {name!r}: {exc}") from exc
            raise
