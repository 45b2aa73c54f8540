"""The Job base class, job options and the ``@rfetch.job`` decorator."""

from __future__ import annotations

import datetime as dt
import functools
import inspect
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Generic, Literal, ParamSpec, TypeVar

from rfetch.arity import Arity, raw_perform
from rfetch.client import DEFAULT, Client, check_options
from rfetch.errors import ConfigError, UnrunnableJobWarning
from rfetch.limits import JobControl

RetryDecision = float | int | Literal["discard", "kill"] | None
"""What ``retry_in`` returns: seconds until the retry, ``"discard"`` (drop the job),
``"kill"`` (straight to the dead set), or None for Sidekiq's default backoff."""


def to_epoch(when: dt.datetime | float | int) -> float:
    """A run time as float epoch seconds.

    Args:
        when: an aware datetime, a naive datetime (taken as local time, as
            ``datetime.timestamp`` does), or epoch seconds.

    Raises:
        ConfigError: anything else.
    """
    if isinstance(when, dt.datetime):
        return when.timestamp()
    if isinstance(when, (int, float)) and not isinstance(when, bool):
        return float(when)
    raise ConfigError(f"a run time must be a datetime or epoch seconds, got {when!r}")


def to_seconds(interval: dt.timedelta | float | int) -> float:
    """An interval as float seconds.

    Raises:
        ConfigError: anything but a timedelta or a number.
    """
    if isinstance(interval, dt.timedelta):
        return interval.total_seconds()
    if isinstance(interval, (int, float)) and not isinstance(interval, bool):
        return float(interval)
    raise ConfigError(f"an interval must be a timedelta or seconds, got {interval!r}")


class JobSetter:
    """A job class with options overridden for the next pushes (``Job.set(...)``)."""

    def __init__(
        self, job_class: type[Job], options: Mapping[str, Any], client: Client | None = None
    ) -> None:
        check_options(options)
        self.job_class = job_class
        self.options = dict(options)
        self.client = client

    def set(self, **options: Any) -> JobSetter:
        """More options on top of these."""
        return JobSetter(self.job_class, {**self.options, **options}, self.client)

    def _client(self) -> Client:
        return self.client if self.client is not None else DEFAULT.get()

    def _options(self, args: Sequence[Any] | None = None) -> dict[str, Any]:
        options = {**self.job_class.default_options(), **self.options}
        if args is not None and "key" not in options:
            key = self.job_class.key_of(args)
            if key is not None:
                options["key"] = key
        if args is not None and "tenant" not in options:
            tenant = self.job_class.tenant_of(args)
            if tenant is not None:
                options["tenant"] = tenant
        return options

    def _checked(self, args: Sequence[Any], options: Mapping[str, Any]) -> Sequence[Any]:
        """``args`` once they fit ``perform`` (a coalescing job's ``perform(batch)`` takes
        the list of its jobs' argument lists, so its pushes are not checked); warns
        (UnrunnableJobWarning) when the job's name starts with ``__main__.``."""
        if options.get("coalesce") is not True:
            self.job_class.check_args(args)
        name = self.job_class.job_name()
        if name.startswith("__main__."):
            warnings.warn(
                f"job {name!r} is defined in the script being run (__main__), so no worker "
                "can register that name (a worker imports the module under its own name): "
                "define the job in a module the script imports, or give the class a name "
                f"(name = {name.split('.', 1)[1]!r})",
                UnrunnableJobWarning,
                stacklevel=4,
            )
        return args

    def perform_async(self, *args: Any) -> str | None:
        """Enqueue now; the jid (24 hex), or None if client middleware dropped the push or a
        unique job's lock is held (unique jobs).

        Raises:
            ArgsMismatch: the arguments do not fit ``perform``; nothing is written.
            ArgsNotSerializable, PayloadTooLarge: nothing is written.
            ConfigError: a bad option (e.g. an ordering key that is not a string).
        """
        options = self._options(args)
        return self._client().push(
            self.job_class.job_name(), self._checked(args, options), options
        )

    def perform_in(self, interval: dt.timedelta | float, *args: Any) -> str | None:
        """Enqueue to run after ``interval`` (seconds or timedelta)."""
        return self.perform_at(time.time() + to_seconds(interval), *args)

    def perform_at(self, when: dt.datetime | float, *args: Any) -> str | None:
        """Enqueue to run at ``when`` (datetime or epoch seconds); a past time runs now.

        Raises:
            ArgsMismatch: as :meth:`perform_async`.
        """
        options = self._options(args)
        return self._client().push(
            self.job_class.job_name(), self._checked(args, options), options, at=to_epoch(when)
        )

    def perform_bulk(
        self, args_list: Iterable[Sequence[Any]], batch_size: int = 1000
    ) -> list[str]:
        """Enqueue one job per argument list, ``batch_size`` per round trip; their jids.

        Raises:
            ArgsMismatch: an argument list does not fit ``perform``; nothing is written.
        """
        arg_lists = list(args_list)
        options = self._options()
        for args in arg_lists:
            if isinstance(args, (list, tuple)):  # push_bulk names any other item itself
                self._checked(args, options)
        keyed = ("key" not in self.options and self.job_class.has_ordering_key()) or (
            "tenant" not in self.options and self.job_class.has_tenant()
        )
        return self._client().push_bulk(
            self.job_class.job_name(),
            arg_lists,
            options,
            batch_size=batch_size,
            options_for=self._options if keyed else None,
        )


class Job:
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
    cron: ClassVar[str | None] = None
    cron_tz: ClassVar[str | None] = None

    jid: str = ""
    _arity: ClassVar[Arity | None] = None
    control: JobControl | None = None
    """The running execution's deadline and cancel flag; None outside a worker."""

    @property
    def deadline(self) -> float | None:
        """When this execution's time limit runs out, in monotonic seconds
        (``time.monotonic()``, not epoch), or None when it has no limit or runs outside a
        worker."""
        return self.control.deadline if self.control is not None else None

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
        """Check ``key_on_failure`` and ``timeout`` when the class is defined.

        Raises:
            ConfigError: a ``key_on_failure`` other than ``"block"`` or ``"skip"``, or a
                ``timeout`` that is not a positive number of seconds.
        """
        super().__init_subclass__(**kwargs)
        if cls.timeout is not None:
            try:
                check_options({"timeout": cls.timeout})
            except ConfigError as exc:
                raise ConfigError(f"{cls.__qualname__}.{exc}") from None
        if cls.key_on_failure not in ("block", "skip"):
            raise ConfigError(
                f'{cls.__qualname__}.key_on_failure must be "block" or "skip", '
                f"got {cls.key_on_failure!r}"
            )

    def perform(self, *args: Any) -> None:
        """The work; raise to fail (the job is then retried)."""
        raise NotImplementedError(f"{type(self).__name__} must define perform()")

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
        """Check that ``perform(*args)`` fits ``perform``'s signature (:mod:`rfetch.arity`).

        Raises:
            ArgsMismatch: too few or too many arguments, or ``perform`` has a keyword-only
                parameter without a default.
        """
        arity: Arity | None = cls.__dict__.get("_arity")
        if arity is None or arity.raw is not raw_perform(cls):  # read once per perform
            arity = Arity.of(cls, cls.perform)
            cls._arity = arity
        arity.check(cls.job_name(), args)

    @classmethod
    def job_name(cls) -> str:
        """The name in payloads: ``name`` if set, else ``module.QualName``."""
        return cls.name or f"{cls.__module__}.{cls.__qualname__}"

    @classmethod
    def default_options(cls) -> dict[str, Any]:
        """The class-level options, as payload fields."""
        options: dict[str, Any] = {"queue": cls.queue, "retry": cls.retry}
        for option in (
            "dead", "backtrace", "retry_queue", "tags", "unique_for", "coalesce", "timeout"
        ):
            value = getattr(cls, option)
            if value is not None:
                options[option] = value
        return options

    @classmethod
    def set(cls, **options: Any) -> JobSetter:
        """Override options for one push: ``SendWelcome.set(queue="critical").perform_async(7)``.

        ``client=`` picks a Client other than the process-wide default.

        Raises:
            ConfigError: an unknown option.
        """
        client = options.pop("client", None)
        return JobSetter(cls, options, client)

    @classmethod
    def perform_async(cls, *args: Any) -> str | None:
        """Enqueue now; returns the jid (24 hex characters)."""
        return JobSetter(cls, {}).perform_async(*args)

    @classmethod
    def perform_in(cls, interval: dt.timedelta | float, *args: Any) -> str | None:
        """Enqueue to run after ``interval`` (seconds or timedelta)."""
        return JobSetter(cls, {}).perform_in(interval, *args)

    @classmethod
    def perform_at(cls, when: dt.datetime | float, *args: Any) -> str | None:
        """Enqueue to run at ``when`` (datetime or float epoch seconds)."""
        return JobSetter(cls, {}).perform_at(when, *args)

    @classmethod
    def perform_bulk(cls, args_list: Iterable[Sequence[Any]], batch_size: int = 1000) -> list[str]:
        """Enqueue many jobs, pipelined ``batch_size`` (default 1,000) per round trip."""
        return JobSetter(cls, {}).perform_bulk(args_list, batch_size)


P = ParamSpec("P")
R = TypeVar("R")


class JobFunction(Generic[P, R]):
    """A plain function made into a job by ``@rfetch.job``; calling it runs it inline."""

    def __init__(self, func: Callable[P, R], job_class: type[Job]) -> None:
        functools.update_wrapper(self, func)
        self.func = func
        self.job_class = job_class

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(*args, **kwargs)

    def set(self, **options: Any) -> JobSetter:
        """Override options for one push."""
        return self.job_class.set(**options)

    def perform_async(self, *args: Any) -> str | None:
        """Enqueue now; returns the jid."""
        return self.job_class.perform_async(*args)

    def perform_in(self, interval: dt.timedelta | float, *args: Any) -> str | None:
        """Enqueue to run after ``interval``."""
        return self.job_class.perform_in(interval, *args)

    def perform_at(self, when: dt.datetime | float, *args: Any) -> str | None:
        """Enqueue to run at ``when``."""
        return self.job_class.perform_at(when, *args)

    def perform_bulk(self, args_list: Iterable[Sequence[Any]], batch_size: int = 1000) -> list[str]:
        """Enqueue many jobs."""
        return self.job_class.perform_bulk(args_list, batch_size)


def job(
    func: Callable[P, R] | None = None, **options: Any
) -> JobFunction[P, R] | Callable[[Callable[P, R]], JobFunction[P, R]]:
    """Make a plain function a job: ``@rfetch.job`` or ``@rfetch.job(queue="mail", retry=3)``.

    The job is registered as ``module.function_name`` unless ``name=`` is given.
    ``cron=`` (and ``cron_tz=``) makes it a periodic job, pushed without arguments at every
    tick (see :class:`Job`); the expression is checked when a worker starts.

    Raises:
        ConfigError: an unknown option.
    """
    name = options.pop("name", None)
    periodic: dict[str, Any] = {k: options.pop(k) for k in ("cron", "cron_tz") if k in options}
    check_options(options)
    per_push = {"key", "tenant", "unique_key"} & set(options)
    if per_push:
        raise ConfigError(
            f"{sorted(per_push)} differ per job: pass them with .set(...) at push time"
        )

    def wrap(fn: Callable[P, R]) -> JobFunction[P, R]:
        def perform(self: Job, *args: Any) -> None:
            fn(*args)  # type: ignore[call-arg]

        # Pushes are checked against the function's own parameters, behind the ``self``
        # every method has.
        own = inspect.signature(fn)
        self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        perform.__signature__ = own.replace(  # type: ignore[attr-defined]
            parameters=[self_param, *own.parameters.values()]
        )
        attrs: dict[str, Any] = {
            "perform": perform,
            "__module__": fn.__module__,
            "__qualname__": fn.__qualname__,
            "__doc__": fn.__doc__,
            "name": name,
        }
        attrs.update(options)
        attrs.update(periodic)
        job_class = type(fn.__name__, (Job,), attrs)
        return JobFunction(fn, job_class)

    if func is not None:
        return wrap(func)
    return wrap
