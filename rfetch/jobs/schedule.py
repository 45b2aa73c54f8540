"""Periodic schedules: what a worker registers, checked whole before anything is kept.

A schedule pushes one ordinary job per tick of its cron expression (Sidekiq Enterprise's
periodic jobs). ``Config.periodic`` holds the schedules of a worker::

    def configure_worker(config: rfetch.Config) -> None:
        config.periodic.register("*/5 * * * *", CleanupJob)
        config.periodic.register("0 2 * * *", NightlyReport, args=["daily"],
                                 tz="Europe/Berlin", queue="reports", name="nightly-report")

and a job class (or an ``@rfetch.job`` function) may carry its own ``cron`` attribute,
collected by :meth:`PeriodicRegistry.collect`. Every problem raises
:class:`rfetch.ConfigError` naming the schedule, and a schedule that fails is not kept.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rfetch.errors import ArgsNotSerializable, ConfigError
from rfetch.jobs.cron import Cron
from rfetch.jobs.options import check_options
from rfetch.jobs.payload import check_args
from rfetch.jobs.signature import job_class_of

NAME_PATTERN = re.compile(r"^[^\s|]{1,200}$")
"""Schedule names: part of Redis key names and of URLs, so no white space or ``|``."""

MAX_CATCH_UP = 3600
"""Seconds: the longest default catch-up window (one hour)."""

MIN_CATCH_UP = 1
"""Seconds: the shortest catch-up window a schedule may set (a tick pushed on time is
still a little late: the leader's wake-up and its round trip to Redis)."""

FAILOVER_MARGIN = 4
"""The default catch-up window is at least this many leader TTLs, so the ticks that fall
due while a SIGKILLed leader's lease runs out are always caught up."""

UNSUPPORTED_OPTIONS = frozenset(
    {"key", "tenant", "unique_for", "unique_key", "coalesce", "jid", "priority"}
)
"""Job options a periodic push refuses: the tick guard already makes each tick unique, the
pushes do not pass the ordering-key gate (nor go to a priority set: a class's priority is
left out of its periodic pushes), and a jid must differ per tick."""


@dataclass(frozen=True)
class Schedule:
    """One checked periodic schedule.

    Attributes:
        name: unique within the registry; the ``periodic`` field of every job it pushes.
        cron: the parsed expression and its time zone.
        job_name: the registered job name (``module.Class`` or the class's ``name``).
        args: the job's arguments (native JSON).
        options: job options, the class's defaults overridden by the registration's.
        catch_up: catch-up window in seconds as given, or None for the default.
        external: the job runs in another process (a Ruby Sidekiq worker, another
            application): pushed by name, not looked for among this worker's jobs.
    """

    name: str
    cron: Cron
    job_name: str
    args: tuple[Any, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)
    catch_up: float | None = None
    external: bool = False

    @property
    def queue(self) -> str:
        """The queue its jobs go to."""
        return str(self.options.get("queue") or "default")

    @property
    def fingerprint(self) -> str:
        """What makes two versions of a schedule tick differently (expression and time
        zone): when it changes between deploys the new version starts at its next tick,
        without catching up ticks of the old one."""
        text = f"{' '.join(self.cron.expression.split())}|{self.cron.tz}"
        return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]

    def window(self, leader_ttl: float, now: float) -> float:
        """The catch-up window in seconds: a tick older than this when the leader gets to
        it is skipped and counted, not pushed.

        The default is one period of the expression, at least ``FAILOVER_MARGIN`` leader
        TTLs and at most ``MAX_CATCH_UP``; an explicit ``catch_up`` is used as given.

        Args:
            leader_ttl: ``Config.leader_ttl``, seconds.
            now: epoch seconds, the point the period is measured from.
        """
        if self.catch_up is not None:
            return self.catch_up
        floor = FAILOVER_MARGIN * leader_ttl
        return float(min(MAX_CATCH_UP, max(self.cron.period(now), floor)))

    def definition(self, window: float) -> dict[str, Any]:
        """The schedule as stored in Redis for the API and the web UI (JSON-native)."""
        return {
            "name": self.name,
            "cron": self.cron.expression,
            "tz": self.cron.tz,
            "class": self.job_name,
            "args": list(self.args),
            "queue": self.queue,
            "options": dict(self.options),
            "catch_up": window,
            "fingerprint": self.fingerprint,
        }

    def definition_json(self, window: float) -> str:
        """:meth:`definition` as compact JSON text."""
        return json.dumps(self.definition(window), separators=(",", ":"), sort_keys=True)


def build_schedule(
    cron: str,
    job_class: Any,
    *,
    args: Sequence[Any] = (),
    name: str | None = None,
    queue: str | None = None,
    tz: str = "UTC",
    catch_up: float | None = None,
    external: bool = False,
    **job_options: Any,
) -> Schedule:
    """Check one registration and build its :class:`Schedule`.

    Raises:
        ConfigError: naming the schedule, for a bad expression or time zone, a job class
            that is not a job, ``external`` with a job class rather than a name, arguments
            that are not native JSON, a bad catch-up window or a bad or unsupported job
            option.
    """
    cls = job_class_of(job_class) or job_class
    label = name or getattr(cls, "__name__", None) or repr(job_class)
    try:
        job_name, defaults = _job_of(job_class, external)
        label = name or job_name
        if not NAME_PATTERN.match(label):
            raise ConfigError(
                "a schedule name is 1-200 characters without white space or '|'"
            )
        if not isinstance(args, (list, tuple)):
            raise ConfigError(f"args must be a list, got {type(args).__name__}")
        check_args(list(args))
        _check_catch_up(catch_up)
        options = _job_options(defaults, job_options, queue)
        parsed = Cron(cron, tz)
    except ArgsNotSerializable as exc:
        raise ConfigError(f"periodic schedule {label!r}: {exc}") from None
    except ConfigError as exc:
        raise ConfigError(f"periodic schedule {label!r}: {exc}") from None
    return Schedule(
        name=label,
        cron=parsed,
        job_name=job_name,
        args=tuple(args),
        options=options,
        catch_up=None if catch_up is None else float(catch_up),
        external=external,
    )


def _job_of(job_class: Any, external: bool) -> tuple[str, dict[str, Any]]:
    """The job name and default options of a registration's ``job_class``.

    Raises:
        ConfigError: ``job_class`` is neither a job nor a name; ``external`` with a class.
    """
    if isinstance(job_class, str):
        return job_class, {}
    cls = job_class_of(job_class)
    if cls is None:
        raise ConfigError(
            f"{job_class!r} is not a job: give an rfetch.Job subclass, an @rfetch.job "
            "function or a registered job name"
        )
    if external:
        raise ConfigError(
            "external=True takes the job's name (a string), not a class of this process"
        )
    return cls.job_name(), dict(cls.default_options())


def _check_catch_up(catch_up: float | None) -> None:
    """Raise ConfigError unless ``catch_up`` is None or a number of seconds (at least
    ``MIN_CATCH_UP``, finite)."""
    if catch_up is not None and (
        isinstance(catch_up, bool) or not isinstance(catch_up, (int, float))
        or not MIN_CATCH_UP <= catch_up < float("inf")
    ):
        raise ConfigError(
            f"catch_up must be a number of seconds >= {MIN_CATCH_UP}, got {catch_up!r}"
        )


def _job_options(
    defaults: Mapping[str, Any], given: Mapping[str, Any], queue: str | None
) -> dict[str, Any]:
    """The class's default options without those a periodic push refuses, overridden by
    the registration's and ``queue``, checked by the client's rules.

    Raises:
        ConfigError: an option of ``UNSUPPORTED_OPTIONS`` given, or a bad option.
    """
    unsupported = UNSUPPORTED_OPTIONS & set(given)
    if unsupported:
        raise ConfigError(
            f"option(s) {sorted(unsupported)} cannot be used by a periodic job (each tick "
            "is pushed once already, to its queue's list, without the ordering-key gate)"
        )
    options = {k: v for k, v in defaults.items() if k not in UNSUPPORTED_OPTIONS}
    options.update(given)
    if queue is not None:
        options["queue"] = queue
    options = {k: v for k, v in options.items() if v is not None}
    check_options(options)
    return options


class PeriodicRegistry:
    """The periodic schedules of one worker (``Config.periodic``).

    Registering checks everything that can be checked without the worker's job registry;
    :meth:`check_jobs` checks the job names when the worker starts.
    """

    def __init__(self) -> None:
        self._schedules: dict[str, Schedule] = {}

    def register(
        self,
        cron: str,
        job_class: Any,
        *,
        args: Sequence[Any] = (),
        name: str | None = None,
        queue: str | None = None,
        tz: str = "UTC",
        catch_up: float | None = None,
        external: bool = False,
        **job_options: Any,
    ) -> Schedule:
        """Add a schedule: push ``job_class`` with ``args`` at every tick of ``cron``.

        Args:
            cron: 5 fields, 6 with seconds first, or a macro such as ``@hourly``.
            job_class: an :class:`rfetch.Job` subclass, an ``@rfetch.job`` function, or a
                job's name (its payload ``class``): a job this worker runs, or with
                ``external=True`` one that only another process runs.
            args: JSON-native arguments (default none).
            name: the schedule's name (default: the job's name); unique.
            queue: the queue (default: the class's).
            tz: IANA time zone the fields are read in (default ``"UTC"``).
            catch_up: seconds a tick may be pushed late after a leaderless gap (default:
                one period of the expression, at least 4 leader TTLs, at most one hour).
            external: the job is run by another process, such as a Ruby Sidekiq worker
                (default False): its name is pushed as given, to ``queue``, as Sidekiq
                Enterprise's periodic jobs push a class name, and the worker does not
                require a job of that name at start. Needs a name, not a class.
            job_options: other job options (``retry``, ``dead``, ``tags``, ...), over the
                class's own.

        Returns:
            The schedule.

        Raises:
            ConfigError: naming the schedule; nothing is registered then.
        """
        schedule = build_schedule(
            cron, job_class, args=args, name=name, queue=queue, tz=tz, catch_up=catch_up,
            external=external, **job_options,
        )
        self._add(schedule)
        return schedule

    def _add(self, schedule: Schedule) -> None:
        if schedule.name in self._schedules:
            raise ConfigError(
                f"periodic schedule {schedule.name!r} is registered twice; give one of "
                "them another name="
            )
        self._schedules[schedule.name] = schedule

    def collect(self, classes: Iterable[Any]) -> None:
        """Register the job classes that carry a ``cron`` attribute (``@rfetch.job(cron=...)``
        or ``cron = "..."`` on a Job subclass), under the job's name, with the class's
        ``cron_tz`` (default UTC); classes already registered under that name are left as
        they are.

        Raises:
            ConfigError: naming the schedule.
        """
        for cls in classes:
            cron = getattr(cls, "cron", None)
            if cron is None:
                continue
            job_name = cls.job_name()
            if job_name in self._schedules:
                continue
            self._add(build_schedule(cron, cls, tz=getattr(cls, "cron_tz", None) or "UTC"))

    def check_jobs(self, known: Iterable[str]) -> None:
        """Check that every schedule's job is one the worker runs, unless the schedule is
        ``external`` (another process, such as a Ruby worker, runs it).

        Args:
            known: the job names of the worker's registry.

        Raises:
            ConfigError: naming the first schedule whose job is unknown and not external.
        """
        names = set(known)
        for schedule in self._schedules.values():
            if schedule.job_name not in names and not schedule.external:
                raise ConfigError(
                    f"periodic schedule {schedule.name!r}: job {schedule.job_name!r} is not "
                    "registered by this worker (is its module named with -r? A job that only "
                    "another process runs, such as a Ruby worker, is registered with "
                    "external=True)"
                )

    def get(self, name: str) -> Schedule | None:
        """The schedule called ``name``, or None."""
        return self._schedules.get(name)

    def __iter__(self) -> Iterator[Schedule]:
        return iter(list(self._schedules.values()))

    def select(self, keep: Callable[[Schedule], bool]) -> PeriodicRegistry:
        """A new registry with the schedules ``keep`` accepts (a shard's leader pushes only
        the periodic jobs of its own queues, :mod:`rfetch.worker.shards`)."""
        chosen = PeriodicRegistry()
        for schedule in self:
            if keep(schedule):
                chosen._add(schedule)
        return chosen

    def __len__(self) -> int:
        return len(self._schedules)

    def __bool__(self) -> bool:
        return bool(self._schedules)

    def __repr__(self) -> str:
        return f"PeriodicRegistry({sorted(self._schedules)})"
