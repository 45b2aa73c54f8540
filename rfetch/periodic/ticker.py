"""The leader's ticker: pushes each due tick of each periodic schedule, exactly once.

Only the leader runs it. After an election it writes its schedules and reads their cursors
(``periodic_sync.lua``); then, whenever a tick falls due by Redis's clock, it pushes it with
``periodic_push.lua``, which checks the leader token, the cursor, the catch-up window and a
per-tick marker in the same call. Ticks older than the window are counted as skipped
(``periodic_skip.lua``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from rfetch.jobs.schedule import Schedule
from rfetch.periodic.catchup import plan_ticks

log = logging.getLogger("rfetch.periodic")

MARKER_MARGIN = 60
"""Seconds a tick's marker outlives the catch-up window."""

EARLY_RETRY = 0.05
"""Seconds before trying again a tick Redis found early (the local estimate of Redis's
clock ran a little ahead)."""

PUSHED, PAUSED, DONE, EARLY, STALE, LOST = "pushed", "paused", "done", "early", "stale", "lost"
"""The answers of ``periodic_push.lua`` (and ``periodic_skip.lua``: skipped, done, lost)."""


class LeadershipLost(Exception):
    """A leader call found that this process's token no longer holds the lease."""


@dataclass(frozen=True)
class BuiltJob:
    """A periodic job ready to push: its jid, queue and serialised payload."""

    jid: str
    queue: str
    payload: bytes


@dataclass(frozen=True)
class SyncEntry:
    """One schedule as written by ``periodic_sync.lua``."""

    name: str
    definition: str
    fingerprint: str


class TickCommands(Protocol):
    """The Redis calls the ticker makes (one typed function per Lua script)."""

    def sync(self, token: str, entries: Sequence[SyncEntry]) -> list[int] | None:
        """Run ``periodic_sync.lua`` (removing the schedules Redis has and ``entries``
        lacks); the cursors in order, or None when the token does not lead."""
        ...

    def push_tick(
        self,
        token: str,
        name: str,
        tick: int,
        window: float,
        marker_ttl: int,
        job: BuiltJob,
        late: bool,
    ) -> str:
        """Run ``periodic_push.lua``; one of the answers above."""
        ...

    def skip_ticks(self, token: str, name: str, through: int, count: int) -> str:
        """Run ``periodic_skip.lua``: ``skipped``, ``done`` or ``lost``."""
        ...


BuildJob = Callable[[Schedule, int], "BuiltJob | None"]
"""Builds the job of a tick (epoch seconds): a Sidekiq payload with ``periodic`` and
``tick`` fields, through the client middleware; None when a middleware stopped it."""

@dataclass
class _Track:
    schedule: Schedule
    window: float
    cursor: int
    next_tick: float | None


class Ticker:
    """Pushes the ticks of a leader's schedules.

    Args:
        schedules: the worker's schedules.
        commands: the Redis calls.
        build: builds a tick's job.
        leader_ttl: ``Config.leader_ttl``, seconds (for the default catch-up windows).
    """

    def __init__(
        self,
        schedules: Sequence[Schedule],
        commands: TickCommands,
        build: BuildJob,
        leader_ttl: float,
    ) -> None:
        self.schedules = list(schedules)
        self.commands = commands
        self.build = build
        self.leader_ttl = leader_ttl
        self._tracks: list[_Track] = []

    @property
    def synced(self) -> bool:
        """Whether :meth:`sync` ran since the last election."""
        return bool(self._tracks) or not self.schedules

    def reset(self) -> None:
        """Forget the cursors (leadership lost): the next leader term syncs again."""
        self._tracks = []

    def sync(self, token: str, now: float) -> None:
        """Write the schedules to Redis and read their cursors (after an election).

        Args:
            token: the leader token.
            now: Redis's clock, epoch seconds (to size the default windows).

        Raises:
            LeadershipLost: the token does not lead.
        """
        windows = [s.window(self.leader_ttl, now) for s in self.schedules]
        entries = [
            SyncEntry(s.name, s.definition_json(w), s.fingerprint)
            for s, w in zip(self.schedules, windows, strict=True)
        ]
        cursors = self.commands.sync(token, entries)
        if cursors is None:
            raise LeadershipLost("lease lost before the schedules were synced")
        self._tracks = [
            _Track(s, w, c, s.cron.next_after(c))
            for s, w, c in zip(self.schedules, windows, cursors, strict=True)
        ]

    def run_due(self, token: str, now: float) -> float | None:
        """Push every tick due at ``now`` (Redis's clock, epoch seconds).

        Returns:
            When to run again (Redis's clock, epoch seconds), or None when no schedule
            fires any more.

        Raises:
            LeadershipLost: a call found that the token no longer leads.
            redis.exceptions.RedisError: Redis unreachable; the cursors in Redis stay
                right, and the next run goes on from them.
        """
        wake: float | None = None
        for track in self._tracks:
            if track.next_tick is not None and track.next_tick <= now:
                self._run_track(token, track, now)
            if track.next_tick is not None:
                wake = track.next_tick if wake is None else min(wake, track.next_tick)
        return wake

    def _run_track(self, token: str, track: _Track, now: float) -> None:
        schedule = track.schedule
        plan = plan_ticks(schedule.cron, track.cursor, now, track.window)
        if plan.skipped and plan.skipped_through is not None:
            self._skip(token, track, plan.skipped_through, plan.skipped)
            log.warning(
                "periodic %s: %d tick(s) older than the %.0f s catch-up window skipped",
                schedule.name, plan.skipped, track.window,
            )
        newest = plan.push[-1] if plan.push else None
        for tick in plan.push:
            late = not plan.complete or tick != newest
            answer = self._push(token, track, tick, late)
            if answer == EARLY:
                track.next_tick = now + EARLY_RETRY
                return
        track.next_tick = plan.next_tick if plan.complete else now

    def _push(self, token: str, track: _Track, tick: int, late: bool) -> str:
        schedule = track.schedule
        try:
            job = self.build(schedule, tick)
        except Exception:
            log.exception("periodic %s: the job of tick %d could not be built", schedule.name, tick)
            self._skip(token, track, tick, 1)
            return STALE
        if job is None:
            log.info("periodic %s: client middleware stopped tick %d", schedule.name, tick)
            self._skip(token, track, tick, 0)
            return DONE
        marker_ttl = math.ceil(track.window) + MARKER_MARGIN
        answer = self.commands.push_tick(
            token, schedule.name, tick, track.window, marker_ttl, job, late
        )
        if answer == LOST:
            raise LeadershipLost(f"lease lost while pushing {schedule.name} tick {tick}")
        if answer == EARLY:
            return answer
        if answer == STALE:
            self._skip(token, track, tick, 1)
            return answer
        track.cursor = tick
        return answer

    def _skip(self, token: str, track: _Track, through: int, count: int) -> None:
        answer = self.commands.skip_ticks(token, track.schedule.name, through, count)
        if answer == LOST:
            raise LeadershipLost(f"lease lost while skipping {track.schedule.name} ticks")
        track.cursor = max(track.cursor, through)
