"""Periodic schedules and the leader, as the API, the CLI and the web UI see them: every
schedule the leader registered, its next tick, last tick pushed, counts and paused flag;
pause, unpause and "run now" (Sidekiq Enterprise 8's periodic job controls).

The schedules are those the last leader wrote (``rfetch:periodic``); their state is kept by
the leader's pushes (``rfetch:periodic:<name>``). See ``docs/periodic.md``.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import Any

from rfetch.errors import ConfigError
from rfetch.jobs.cron import Cron
from rfetch.periodic.jobs import PeriodicJobBuilder
from rfetch.push.client import Client

from .context import Context
from .records import to_text


class PeriodicNotFound(KeyError):
    """No schedule of that name is registered in Redis."""


@dataclass(frozen=True)
class LeaderInfo:
    """The leader lease.

    Attributes:
        identity: the leading process (``host:pid:hex``), or None when no process has
            renewed the lease within ``leader_ttl``.
        since: when it was elected, epoch seconds.
        renewed_at: its last renewal, epoch seconds.
        expires_in: seconds left on its lease.
        changes: elections so far (``rfetch_leader_changes_total``).
    """

    identity: str | None
    since: float | None
    renewed_at: float | None
    expires_in: float | None
    changes: int

    @property
    def present(self) -> bool:
        """Whether a process holds the lease."""
        return self.identity is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {**asdict(self), "present": self.present}


@dataclass(frozen=True)
class PeriodicInfo:
    """One periodic schedule with its state.

    Attributes:
        name, cron, tz, job_class, args, queue, options: as registered.
        catch_up: the catch-up window, seconds.
        next_tick: the next tick after now, epoch seconds (None if it fires no more or the
            expression cannot be read by this version).
        last_tick: the last tick pushed (epoch seconds), last_jid its job's jid,
            last_pushed_at when it was pushed.
        pushed: ticks pushed; caught_up: of those, pushed late after a leaderless gap;
            skipped: ticks older than the window, never pushed.
        paused: ticks pass without a push.
        run_now_jid, run_now_at: the last "run now" push.
    """

    name: str
    cron: str
    tz: str
    job_class: str
    args: list[Any]
    queue: str
    options: dict[str, Any]
    catch_up: float
    next_tick: float | None
    last_tick: int | None
    last_jid: str | None
    last_pushed_at: float | None
    pushed: int
    caught_up: int
    skipped: int
    paused: bool
    run_now_jid: str | None
    run_now_at: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def _float(value: Any) -> float | None:
    return None if value is None else float(to_text(value))


def read_leader(ctx: Context) -> LeaderInfo:
    """The leader lease, in one round trip."""
    keys = ctx.keys
    pipe = ctx.redis.pipeline(transaction=False)
    pipe.hgetall(keys.leader)
    pipe.pttl(keys.leader)
    pipe.get(keys.leader_changes)
    lease, pttl, changes = pipe.execute()
    fields = {to_text(k): to_text(v) for k, v in lease.items()}
    identity = fields.get("identity")
    return LeaderInfo(
        identity=identity or None,
        since=_float(fields.get("since")),
        renewed_at=_float(fields.get("renewed_at")),
        expires_in=int(pttl) / 1000 if identity and int(pttl) >= 0 else None,
        changes=int(changes or 0),
    )


def _next_tick(definition: dict[str, Any], now: float) -> float | None:
    try:
        return Cron(str(definition.get("cron")), str(definition.get("tz") or "UTC")).next_after(
            now
        )
    except ConfigError:
        return None


def list_periodic(ctx: Context, now: float | None = None) -> list[PeriodicInfo]:
    """Every registered schedule with its state, sorted by name, in two round trips.

    Args:
        ctx: the API context.
        now: epoch seconds the next tick is counted from (default: this machine's clock).
    """
    keys = ctx.keys
    definitions = {to_text(k): v for k, v in ctx.redis.hgetall(keys.periodic).items()}
    names = sorted(definitions)
    pipe = ctx.redis.pipeline(transaction=False)
    for name in names:
        pipe.hgetall(keys.periodic_state(name))
    states = pipe.execute()
    at = time.time() if now is None else now
    found = []
    for name, raw_state in zip(names, states, strict=True):
        try:
            definition = json.loads(definitions[name])
        except ValueError:
            definition = {}
        state = {to_text(k): to_text(v) for k, v in raw_state.items()}
        found.append(PeriodicInfo(
            name=name,
            cron=str(definition.get("cron", "")),
            tz=str(definition.get("tz", "UTC")),
            job_class=str(definition.get("class", "")),
            args=list(definition.get("args") or []),
            queue=str(definition.get("queue", "default")),
            options=dict(definition.get("options") or {}),
            catch_up=float(definition.get("catch_up") or 0),
            next_tick=_next_tick(definition, at),
            last_tick=int(state["last_tick"]) if "last_tick" in state else None,
            last_jid=state.get("last_jid"),
            last_pushed_at=_float(state.get("last_pushed_at")),
            pushed=int(state.get("pushed", 0)),
            caught_up=int(state.get("caught_up", 0)),
            skipped=int(state.get("skipped", 0)),
            paused="paused" in state,
            run_now_jid=state.get("run_now_jid"),
            run_now_at=_float(state.get("run_now_at")),
        ))
    return found


def _definition(ctx: Context, name: str) -> dict[str, Any]:
    raw = ctx.redis.hget(ctx.keys.periodic, name)
    if raw is None:
        raise PeriodicNotFound(name)
    data: dict[str, Any] = json.loads(raw)
    return data


def set_paused(ctx: Context, name: str, paused: bool) -> None:
    """Pause (no push until unpaused; the ticks in between are not caught up) or unpause a
    schedule; the leader's next push sees it.

    Raises:
        PeriodicNotFound: no such schedule.
    """
    _definition(ctx, name)
    state = ctx.keys.periodic_state(name)
    if paused:
        ctx.redis.hset(state, "paused", "1")
    else:
        ctx.redis.hdel(state, "paused")


def run_now(ctx: Context, name: str) -> str | None:
    """Push one job of schedule ``name`` now, outside its ticks (no tick guard, the cursor
    does not move); its ``tick`` field is the present by Redis's clock, whole seconds.

    Returns:
        The jid, or None when a client middleware of ``ctx.config`` stopped the push.

    Raises:
        PeriodicNotFound: no such schedule.
        ArgsNotSerializable, ConfigError, PayloadTooLarge: the stored definition no longer
            makes a valid job.
    """
    definition = _definition(ctx, name)
    builder = PeriodicJobBuilder(ctx.config, Client(ctx.config, ctx.redis), ctx.redis)
    now = ctx.redis_time()
    job = builder.build(
        name, str(definition.get("class")), list(definition.get("args") or []),
        dict(definition.get("options") or {}), int(now),
    )
    if job is None:
        return None
    keys = ctx.keys
    pipe = ctx.redis.pipeline(transaction=True)
    pipe.lpush(keys.queue(job.queue), job.payload)
    pipe.sadd(keys.queues, job.queue)
    pipe.hset(keys.periodic_state(name), mapping={"run_now_jid": job.jid, "run_now_at": now})
    pipe.execute()
    return job.jid


def leader_problem(ctx: Context) -> str | None:
    """Why periodic jobs are not being pushed, or None: some schedules are registered but no
    process has renewed the leader lease within ``leader_ttl`` (one round trip)."""
    pipe = ctx.redis.pipeline(transaction=False)
    pipe.hlen(ctx.keys.periodic)
    pipe.exists(ctx.keys.leader)
    schedules, leading = pipe.execute()
    if int(schedules) and not int(leading):
        return (f"no leader has renewed its lease within leader_ttl: {int(schedules)} periodic "
                "schedule(s) are not pushed")
    return None


def count_periodic(ctx: Context) -> int:
    """How many periodic schedules are registered (one HLEN)."""
    return int(ctx.redis.hlen(ctx.keys.periodic))


class PeriodicMethods:
    """:class:`rfetch.api.Api`'s periodic schedule and leader methods (a mixin: the Api
    gives ``ctx``)."""

    ctx: Context

    def periodic(self) -> list[PeriodicInfo]:
        """Every periodic schedule the leader registered, with its next tick, last tick
        pushed, counts and paused flag (see ``docs/periodic.md``)."""
        return list_periodic(self.ctx)

    def periodic_count(self) -> int:
        """How many periodic schedules are registered (one HLEN)."""
        return count_periodic(self.ctx)

    def leader_problem(self) -> str | None:
        """A sentence when periodic schedules are registered but no process has renewed the
        leader lease within ``leader_ttl`` (so none is pushed); None otherwise."""
        return leader_problem(self.ctx)

    def leader(self) -> LeaderInfo:
        """The leader lease: which process leads, since when, its last renewal."""
        return read_leader(self.ctx)

    def pause_periodic(self, name: str) -> None:
        """Pause a periodic schedule: its ticks pass without a push until unpaused.

        Raises:
            PeriodicNotFound: no such schedule.
        """
        set_paused(self.ctx, name, True)

    def unpause_periodic(self, name: str) -> None:
        """Unpause a periodic schedule: its next tick is pushed.

        Raises:
            PeriodicNotFound: no such schedule.
        """
        set_paused(self.ctx, name, False)

    def run_periodic(self, name: str) -> str | None:
        """Push one job of a periodic schedule now, outside its ticks; its jid (None when
        client middleware stopped it). See :func:`rfetch.api.periodic.run_now`.

        Raises:
            PeriodicNotFound: no such schedule.
        """
        return run_now(self.ctx, name)
