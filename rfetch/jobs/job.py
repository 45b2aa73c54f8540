"""The Job base class and its options."""

from __future__ import annotations

import datetime as dt
import functools
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Literal, cast

from rfetch.batch.batch import Batch
from rfetch.errors import ConfigError
from rfetch.jobs.arity import Arity, positional_args, raw_perform
from rfetch.jobs.job_control import JobControl
from rfetch.jobs.job_setter import BulkItem, HasPerform, JobSetter, P
from rfetch.jobs.job_steps import Steps
from rfetch.jobs.options import SetOptions, Unpack, check_options
from rfetch.jobs.signature import Signature
from rfetch.workflow.progress import ProgressWriter, check_progress

RetryDecision = float | int | Literal["discard", "kill"] | None
"""What ``retry_in`` returns: seconds until the retry, ``"discard"`` (drop the job),
``"kill"`` (straight to the dead set), or None for Sidekiq's default backoff."""


class Job(Steps):
    """Base class of job classes.

    Subclass it and define ``perform``; class attributes are the default options::

        class SendWelcome(rfetch.Job):
            queue = "mail"
            retry = 5
            def perform(self, user_id: int, template: str) -> None: ...

    Options (Sidekiq's): ``queue`` (default ``"default"``), ``retry`` (True = 25 retries,
    an int = that many, 0 = straight to the dead set, False = no retry and no dead set),
    ``dead`` (False: discard instead of the dead set), ``backtrace`` (True or a line count:
    keep the traceback in the payload), ``retry_queue`` (queue for retries), ``tags``.
    ``name`` sets the registered name (default ``module.QualName``), e.g. to take jobs that a
    Ruby client pushes as ``"SendWelcome"``.

    Ordering keys (docs/ordering.md): define ``ordering_key(self, *args)`` (or push with
    ``set(key=...)``) to run the jobs of one key one at a time in enqueue order;
    ``key_on_failure`` says what a failed job of a key does: ``"block"`` (default: later
    jobs of the key wait until it succeeds or dies) or ``"skip"`` (they go on; the retry
    loses its place). ``unique_for`` (seconds; per push ``unique_key=``) makes a push of a
    job already pending or running return None. Define ``tenant(self, *args)`` (or push
    with ``set(tenant=...)``) to share the queue fairly across tenants (deficit round robin).
    ``coalesce = True`` (with an ordering key): the waiting jobs of the key run as one
    execution, ``perform(self, batch)`` with ``batch`` the list of their argument lists in
    score order (``score=``, default enqueue time); ``coalesce = "last"``: only the newest
    one's ``perform(*args)`` runs.

    Flow control (docs/flow-control.md): ``concurrency_key`` with ``concurrency_limit``
    (or ``set(concurrency_key="tenant:42", concurrency_limit=3)``) lets at most that many
    jobs of the key be fetched and running at once across every worker, the others waiting
    in Redis unfetched; ``expires_in`` (seconds; Sidekiq Pro's expiring jobs) drops a job
    not started that long after its run time. ``priority`` (a whole number from -100 to
    100, default 0; per push ``set(priority=...)``) orders a queue's ready jobs: higher runs
    first, push order within a priority (docs/ordering.md, "Priorities").

    ``perform`` may be ``async def``: the class is then an async job (``is_async``), awaited
    on the worker's event loop.

    The push methods are typed from ``perform``'s own signature (ParamSpec), so a type
    checker flags ``SendWelcome.perform_async("42")`` when ``perform`` takes an ``int``.

    ``timeout`` (seconds; per push ``set(timeout=...)``; default the worker's
    ``--job-timeout``) is the job's time limit: ``self.deadline`` says when it runs out and
    ``self.check_cancelled()`` raises :class:`rfetch.JobTimeout` past it, or
    :class:`rfetch.JobCancelled` once the job was cancelled, so a long job can stop at a
    safe point. A job still running ``job_timeout_grace`` seconds later is stopped by the
    worker (docs/guarantees.md, "Time limits").

    Periodic jobs (docs/periodic.md): ``cron`` (5 fields, 6 with seconds first, or a macro
    such as ``"@hourly"``) makes every ``rfetch worker`` that imports the class register it
    as a periodic schedule, named after the job, pushed without arguments at every tick
    by the leader; ``cron_tz`` is its IANA time zone (default UTC). A bad value stops the
    worker's start with a ConfigError naming the schedule.

    A worker sets ``jid`` and ``control`` on the instance before calling ``perform``.
    """

    queue: ClassVar[str] = "default"
    retry: ClassVar[bool | int] = True
    dead: ClassVar[bool | None] = None
    backtrace: ClassVar[bool | int | None] = None
    retry_queue: ClassVar[str | None] = None
    tags: ClassVar[Sequence[str] | None] = None
    name: ClassVar[str | None] = None
    unique_for: ClassVar[float | None] = None
    coalesce: ClassVar[bool | Literal["last"] | None] = None
    key_on_failure: ClassVar[Literal["block", "skip"]] = "block"
    timeout: ClassVar[float | None] = None
    store_result: ClassVar[int | None] = None
    concurrency_key: ClassVar[str | None] = None
    concurrency_limit: ClassVar[int | None] = None
    expires_in: ClassVar[float | None] = None
    priority: ClassVar[int | None] = None
    cron: ClassVar[str | None] = None
    cron_tz: ClassVar[str | None] = None

    is_async: ClassVar[bool] = False
    """Set when the class is defined: whether ``perform`` is ``async def``."""

    jid: str = ""
    bid: str | None = None
    """The batch of the running job (set by the worker), or None."""
    _arity: ClassVar[Arity | None] = None
    control: JobControl | None = None
    """The running execution's deadline and cancel flag; None outside a worker."""

    progress_writer: ProgressWriter | None = None
    """Where :meth:`progress` writes; None outside a worker."""

    def progress(self, percent: float, message: str = "") -> None:
        """Report how far the running job is, ``percent`` 0..100 and a short ``message``
        (one SET of a key kept 1 h; see :class:`rfetch.workflow.progress.ProgressWriter`):
        shown on the busy page, by the API and ``rfetch processes``. Outside a worker it
        only checks its arguments.

        Raises:
            ConfigError: a percent outside 0..100, or a message that is not a string.
        """
        if self.progress_writer is None:
            check_progress(percent, message)
            return
        self.progress_writer.write(self.jid, percent, message)

    @property
    def deadline(self) -> float | None:
        """When this execution's time limit runs out, in monotonic seconds
        (``time.monotonic()``, not epoch), or None when it has no limit or runs outside a
        worker."""
        return self.control.deadline if self.control is not None else None

    @property
    def batch(self) -> Batch | None:
        """The running job's batch, reopened to add jobs to it (``with self.batch.jobs():``,
        Sidekiq Pro's ``batch``), or None when the job is not in a batch."""
        if self.bid is None:
            return None
        return Batch.reopen(self.bid)

    def check_cancelled(self) -> None:
        """Return if the job may go on; call it at safe points of a long job.

        Raises:
            rfetch.JobCancelled: the job was cancelled (``rfetch cancel``); it is not
                retried.
            rfetch.JobTimeout: ``self.deadline`` has passed; the job fails and is retried
                like any failure.
        """
        if self.control is not None:
            self.control.check()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Check the class when it is defined, and note whether ``perform`` is async.

        Raises:
            ConfigError: ``key_on_failure`` other than ``"block"`` or ``"skip"``; a
                ``timeout`` that is not a positive number of seconds; a ``priority``
                that is not a whole number from -100 to 100; a ``perform`` that
                is a generator; an async ``ordering_key`` or ``tenant`` (they run at push
                time, in the caller's thread).
        """
        super().__init_subclass__(**kwargs)
        defined = {
            n: getattr(cls, n) for n in ("timeout", "priority") if getattr(cls, n) is not None
        }
        if defined:
            try:
                check_options(defined)
            except ConfigError as exc:
                raise ConfigError(f"{cls.__qualname__}.{exc}") from None
        if cls.key_on_failure not in ("block", "skip"):
            raise ConfigError(
                f'{cls.__qualname__}.key_on_failure must be "block" or "skip", '
                f"got {cls.key_on_failure!r}"
            )
        if inspect.isasyncgenfunction(cls.perform) or inspect.isgeneratorfunction(cls.perform):
            raise ConfigError(
                f"{cls.__qualname__}.perform is a generator; it must be a plain or an "
                "async function (a generator would never run its body)"
            )
        for hook in ("ordering_key", "tenant"):
            if inspect.iscoroutinefunction(getattr(cls, hook)):
                raise ConfigError(
                    f"{cls.__qualname__}.{hook} must not be async: it runs at push time"
                )
        cls.is_async = inspect.iscoroutinefunction(cls.perform)

    def perform(self, *args: Any, **kwargs: Any) -> object:
        """The work; raise to fail (the job is then retried). May be ``async def``."""
        raise NotImplementedError(f"{type(self).__name__} must define perform()")

    @classmethod
    def positional_args(cls, args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[Any]:
        """The job's arguments as the positional list a payload carries (Sidekiq's ``args``).

        Keyword arguments are bound to ``perform``'s parameters: ``perform_async(1,
        template="x")`` for ``perform(self, user_id, template)`` sends ``[1, "x"]``; a
        parameter skipped between them takes its default.

        Raises:
            TypeError: a keyword that ``perform`` does not take, a missing parameter, or a
                keyword-only parameter (a JSON list has no place for it).
        """
        return positional_args(cls.perform, cls.job_name(), args, kwargs)

    def ordering_key(self, *args: Any) -> str | None:
        """The ordering key of a job with these arguments, or None (no ordering). Called at
        push time on a fresh instance, unless the push sets ``key=``."""
        return None

    @classmethod
    def has_ordering_key(cls) -> bool:
        """Whether the class overrides :meth:`ordering_key`."""
        return cls.ordering_key is not Job.ordering_key

    @classmethod
    def key_of(cls, args: Sequence[Any]) -> str | None:
        """The class's ordering key for ``args`` (None when the class defines none)."""
        if not cls.has_ordering_key():
            return None
        return cls().ordering_key(*args)

    def tenant(self, *args: Any) -> str | None:
        """The tenant of a job with these arguments, or None (no fair scheduling). Called
        at push time on a fresh instance, unless the push sets ``tenant=``."""
        return None

    @classmethod
    def has_tenant(cls) -> bool:
        """Whether the class overrides :meth:`tenant`."""
        return cls.tenant is not Job.tenant

    @classmethod
    def tenant_of(cls, args: Sequence[Any]) -> str | None:
        """The class's tenant for ``args`` (None when the class defines none)."""
        if not cls.has_tenant():
            return None
        return cls().tenant(*args)

    def retry_in(self, count: int, exc: BaseException, job: dict[str, Any]) -> RetryDecision:
        """Delay before retry number ``count`` (0-based), Sidekiq's ``sidekiq_retry_in``.

        Return seconds, ``"discard"``, ``"kill"``, or None for the default backoff
        ``count**4 + 15 + rand(10) * (count + 1)``.
        """
        return None

    def retries_exhausted(self, job: dict[str, Any], exc: BaseException) -> None:
        """Called once when the job has no retries left (Sidekiq's
        ``sidekiq_retries_exhausted``), right after it was written to the dead set (or
        discarded), so a job pushed back meanwhile never triggers it."""

    @classmethod
    def check_args(cls, args: Sequence[Any]) -> None:
        """Check that ``perform(*args)`` fits ``perform``'s signature (:mod:`rfetch.jobs.arity`).

        Raises:
            ArgsMismatch: too few or too many arguments, or ``perform`` has a keyword-only
                parameter without a default.
        """
        cls._arity_now().check(cls.job_name(), args)

    @classmethod
    def _args_checker(cls) -> Callable[[Sequence[Any]], None]:
        """:meth:`check_args` for the many argument lists of a bulk push: unless a class
        overrides it, the arity and the name are read once, not once per job (profiled)."""
        if cls.check_args.__func__ is not Job.check_args.__func__:  # type: ignore[attr-defined]
            return cls.check_args
        return functools.partial(cls._arity_now().check, cls.job_name())

    @classmethod
    def _arity_now(cls) -> Arity:
        """``perform``'s arity, read once per ``perform`` (again if it was replaced)."""
        arity: Arity | None = cls.__dict__.get("_arity")
        if arity is None or arity.raw is not raw_perform(cls):
            arity = Arity.of(cls, cls.perform)
            cls._arity = arity
        return arity

    @classmethod
    def job_name(cls) -> str:
        """The name in payloads: ``name`` if set, else ``module.QualName``."""
        return cls.name or f"{cls.__module__}.{cls.__qualname__}"

    @classmethod
    def default_options(cls) -> dict[str, Any]:
        """The class-level options, as payload fields."""
        options: dict[str, Any] = {"queue": cls.queue, "retry": cls.retry}
        for option in (
            "dead", "backtrace", "retry_queue", "tags", "unique_for", "coalesce", "timeout",
            "store_result",
            "concurrency_key", "concurrency_limit", "expires_in", "priority",
        ):
            value = getattr(cls, option)
            if value is not None:
                options[option] = value
        return options

    @classmethod
    def set(cls: type[HasPerform[P]], **options: Unpack[SetOptions]) -> JobSetter[P]:
        """Override options for one push: ``SendWelcome.set(queue="critical").perform_async(7)``.

        ``client=`` picks a Client other than the process-wide default.

        Raises:
            ConfigError: an unknown option.
        """
        client = options.pop("client", None)
        return JobSetter(cast("type[Job]", cls), options, client)

    @classmethod
    def s(cls: type[HasPerform[P]], *args: P.args, **kwargs: P.kwargs) -> Signature:
        """A signature of this job (Celery's ``.s()``): the class and its arguments, to push
        later or as part of a workflow (``rfetch.chain``). Options: ``.s(...).set(...)``.

        Raises:
            ArgsMismatch: the arguments do not fit ``perform``.
        """
        return Signature.of(cast("type[Job]", cls), args, kwargs)

    @classmethod
    def perform_async(cls: type[HasPerform[P]], *args: P.args, **kwargs: P.kwargs) -> str | None:
        """Enqueue now; returns the jid (24 hex characters). See JobSetter.perform_async."""
        return JobSetter[P](cast("type[Job]", cls), {}).perform_async(*args, **kwargs)

    @classmethod
    def perform_in(
        cls: type[HasPerform[P]],
        interval: dt.timedelta | float,
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> str | None:
        """Enqueue to run after ``interval`` (seconds or timedelta)."""
        return JobSetter[P](cast("type[Job]", cls), {}).perform_in(interval, *args, **kwargs)

    @classmethod
    def perform_at(
        cls: type[HasPerform[P]],
        when: dt.datetime | float,
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> str | None:
        """Enqueue to run at ``when`` (datetime or float epoch seconds)."""
        return JobSetter[P](cast("type[Job]", cls), {}).perform_at(when, *args, **kwargs)

    @classmethod
    def perform_bulk(
        cls, args_list: Iterable[BulkItem], batch_size: int | None = None
    ) -> list[str]:
        """Enqueue many jobs in one atomic write: all are written, or none and it raises
        (``batch_size``: at most that many per atomic write, see
        :meth:`rfetch.push.client.Client.push_bulk`)."""
        return JobSetter[Any](cls, {}).perform_bulk(args_list, batch_size)

    # -- from asyncio code (redis.asyncio; the same checks, middleware and push buffer) ----

    @classmethod
    async def aperform_async(
        cls: type[HasPerform[P]], *args: P.args, **kwargs: P.kwargs
    ) -> str | None:
        """``await SendWelcome.aperform_async(42)``: :meth:`perform_async` for asyncio code."""
        return await JobSetter[P](cast("type[Job]", cls), {}).aperform_async(*args, **kwargs)

    @classmethod
    async def aperform_in(
        cls: type[HasPerform[P]],
        interval: dt.timedelta | float,
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> str | None:
        """:meth:`perform_in` for asyncio code."""
        setter = JobSetter[P](cast("type[Job]", cls), {})
        return await setter.aperform_in(interval, *args, **kwargs)

    @classmethod
    async def aperform_at(
        cls: type[HasPerform[P]],
        when: dt.datetime | float,
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> str | None:
        """:meth:`perform_at` for asyncio code."""
        return await JobSetter[P](cast("type[Job]", cls), {}).aperform_at(when, *args, **kwargs)

    @classmethod
    async def aperform_bulk(
        cls, args_list: Iterable[BulkItem], batch_size: int | None = None
    ) -> list[str]:
        """:meth:`perform_bulk` for asyncio code."""
        return await JobSetter[Any](cls, {}).aperform_bulk(args_list, batch_size)
