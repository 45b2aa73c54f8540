"""``Job.set(...)``: a job class with options for the next pushes, and the typed push
methods (``perform_async``, ``perform_in``, ``perform_at``, ``perform_bulk`` and their
``aperform_*`` forms for asyncio code)."""

from __future__ import annotations

import asyncio
import datetime as dt
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, Protocol

from rfetch.errors import ConfigError, UnrunnableJobWarning
from rfetch.jobs.options import JobOptions, Unpack, check_options
from rfetch.jobs.signature import Signature
from rfetch.jobs.workflow_options import after_as_id
from rfetch.push.client import DEFAULT, Client
from rfetch.push.sink import INTERCEPTION
from rfetch.workflow.depend import push_dependents

if TYPE_CHECKING:
    from rfetch.jobs.job import Job

P = ParamSpec("P")

BulkItem = Sequence[Any] | Signature
"""One job of a bulk push: its argument list, or a signature of the job (``Job.s(...)``),
whose arguments a type checker has checked against ``perform`` where it was written."""


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

class HasPerform(Protocol[P]):
    """What the typed push methods read ``perform``'s parameters from."""

    def perform(self, *args: P.args, **kwargs: P.kwargs) -> object: ...


class JobSetter(Generic[P]):
    """A job class with options overridden for the next pushes (``Job.set(...)``).

    Typed from the job's ``perform`` (ParamSpec ``P``), so a type checker flags a wrong
    argument at the call site of ``perform_async``, ``perform_in`` and ``perform_at``.
    """

    def __init__(
        self, job_class: type[Job], options: Mapping[str, Any], client: Client | None = None
    ) -> None:
        options = after_as_id(options)
        check_options(options)
        self.job_class = job_class
        self.options = dict(options)
        self.client = client

    def set(self, **options: Unpack[JobOptions]) -> JobSetter[P]:
        """More options on top of these (a type checker flags an unknown option or a value
        of the wrong type; :func:`rfetch.jobs.options.check_options` checks them at run time).

        Raises:
            ConfigError: an unknown option or a bad option value.
        """
        return JobSetter(
            self.job_class, {**self.options, **after_as_id(options)}, self.client
        )

    def _no_after(self, how: str) -> None:
        if "after" in self.options:
            raise ConfigError(
                f"{how} cannot take after=: a waiting job runs when its dependency ends "
                "(push it with perform_async)"
            )

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

    def _checked(self, args: list[Any], options: Mapping[str, Any]) -> list[Any]:
        """``args`` once they fit ``perform`` (a coalescing job's ``perform(batch)`` takes
        the list of its jobs' argument lists, so its pushes are not checked); warns
        (UnrunnableJobWarning) when the job's name starts with ``__main__.``."""
        if options.get("coalesce") is not True:
            self.job_class.check_args(args)
        self._warn_if_main(stacklevel=5)
        return args

    def _warn_if_main(self, stacklevel: int) -> None:
        """Warn (UnrunnableJobWarning) when the job's name starts with ``__main__.``;
        ``stacklevel`` points the warning at the application's push call."""
        name = self.job_class.job_name()
        if name.startswith("__main__."):
            warnings.warn(
                f"job {name!r} is defined in the script being run (__main__), so no worker "
                "can register that name (a worker imports the module under its own name): "
                "define the job in a module the script imports, or give the class a name "
                f"(name = {name.split('.', 1)[1]!r})",
                UnrunnableJobWarning,
                stacklevel=stacklevel,
            )

    def _push_args(
        self, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> tuple[str, list[Any], dict[str, Any]]:
        """The class name, checked positional arguments and options of one push."""
        values = self.job_class.positional_args(args, kwargs)
        options = self._options(values)
        return self.job_class.job_name(), self._checked(values, options), options

    def s(self, *args: P.args, **kwargs: P.kwargs) -> Signature:
        """A signature of the job with these options (see :meth:`rfetch.Job.s`); the
        client given to ``set(client=...)`` is not part of it.

        Raises:
            ArgsMismatch: the arguments do not fit ``perform``.
        """
        return Signature.of(self.job_class, args, kwargs, self.options)

    def perform_async(self, *args: P.args, **kwargs: P.kwargs) -> str | None:
        """Enqueue now; the jid (24 hex), or None if client middleware dropped the push or a
        unique job's lock is held (unique jobs).

        Keyword arguments are bound to ``perform``'s parameters and sent as the positional
        list Sidekiq's ``args`` is.

        Raises:
            ArgsMismatch: the arguments do not fit ``perform``; nothing is written.
            ArgsNotSerializable, PayloadTooLarge: nothing is written.
            ConfigError: a bad option (e.g. an ordering key that is not a string).
            TypeError: keyword arguments that do not fit ``perform``'s parameters.
        """
        name, values, options = self._push_args(args, kwargs)
        if "after" in options:
            return push_dependents(self._client(), [(name, values, options)])[0].jid
        return self._client().push(name, values, options)

    def perform_in(
        self, interval: dt.timedelta | float, /, *args: P.args, **kwargs: P.kwargs
    ) -> str | None:
        """Enqueue to run after ``interval`` (seconds or timedelta); as perform_async."""
        return self.perform_at(INTERCEPTION.now() + to_seconds(interval), *args, **kwargs)

    def perform_at(
        self, when: dt.datetime | float, /, *args: P.args, **kwargs: P.kwargs
    ) -> str | None:
        """Enqueue to run at ``when`` (datetime or epoch seconds); a past time runs now.

        Raises:
            ArgsMismatch: as :meth:`perform_async`.
        """
        self._no_after("perform_at / perform_in")
        return self._client().push(*self._push_args(args, kwargs), at=to_epoch(when))

    def perform_bulk(
        self, args_list: Iterable[BulkItem], batch_size: int | None = None
    ) -> list[str]:
        """Enqueue one job per argument list, all or none (see
        :meth:`rfetch.push.client.Client.push_bulk`; ``batch_size`` bounds one atomic write);
        their jids. An item is an argument list, or a signature of this job without
        options (``SendWelcome.s(42, "hi")``: typed from ``perform``, so a type checker
        flags a wrong argument, which a list's items cannot be).

        Raises:
            ArgsMismatch: an argument list does not fit ``perform``; nothing is written.
            ConfigError: a signature of another job, or one with options; nothing is
                written.
        """
        self._no_after("perform_bulk")
        return self._client().push_bulk(
            *self._bulk(args_list), batch_size=batch_size, options_for=self._options_for()
        )

    async def aperform_async(self, *args: P.args, **kwargs: P.kwargs) -> str | None:
        """:meth:`perform_async` from asyncio code, through ``redis.asyncio`` (the client's
        ``aio`` face: same checks, middleware, sink and push buffer)."""
        if "after" in self.options:
            return await asyncio.to_thread(lambda: self.perform_async(*args, **kwargs))
        return await self._client().aio.push(*self._push_args(args, kwargs))

    async def aperform_in(
        self, interval: dt.timedelta | float, /, *args: P.args, **kwargs: P.kwargs
    ) -> str | None:
        """:meth:`perform_in` from asyncio code."""
        return await self.aperform_at(INTERCEPTION.now() + to_seconds(interval), *args, **kwargs)

    async def aperform_at(
        self, when: dt.datetime | float, /, *args: P.args, **kwargs: P.kwargs
    ) -> str | None:
        """:meth:`perform_at` from asyncio code."""
        self._no_after("aperform_at / aperform_in")
        return await self._client().aio.push(*self._push_args(args, kwargs), at=to_epoch(when))

    async def aperform_bulk(
        self, args_list: Iterable[BulkItem], batch_size: int | None = None
    ) -> list[str]:
        """:meth:`perform_bulk` from asyncio code (all or none, as it)."""
        self._no_after("aperform_bulk")
        return await self._client().aio.push_bulk(
            *self._bulk(args_list), batch_size=batch_size, options_for=self._options_for()
        )

    def _bulk(
        self, args_list: Iterable[BulkItem]
    ) -> tuple[str, list[Sequence[Any]], dict[str, Any]]:
        """The class name, argument lists and class-level options of a bulk push.

        Raises:
            ArgsMismatch: an argument list does not fit ``perform``; nothing is written.
            ConfigError: a signature of another job or with options; nothing is written.
        """
        arg_lists = [self._bulk_args(item) for item in args_list]
        options = self._options()
        if arg_lists:
            self._warn_if_main(stacklevel=4)  # once per bulk push, not once per job
        if options.get("coalesce") is not True:
            check = self.job_class._args_checker()
            for args in arg_lists:
                if isinstance(args, (list, tuple)):  # push_bulk names any other item itself
                    check(args)
        return self.job_class.job_name(), arg_lists, options

    def _bulk_args(self, item: BulkItem) -> Sequence[Any]:
        """An item of a bulk push as an argument list (a signature gives its arguments)."""
        if not isinstance(item, Signature):
            return item
        if item.job_class is not self.job_class:
            raise ConfigError(
                f"perform_bulk of {self.job_class.job_name()} got a signature of "
                f"{item.name}: a bulk push is of one job"
            )
        if item.options:
            raise ConfigError(
                f"perform_bulk got {item!r}: a bulk push's options apply to all its jobs, "
                "give them to set() (a signature in it takes none)"
            )
        return list(item.args)

    def _options_for(self) -> Callable[[Sequence[Any]], dict[str, Any]] | None:
        """Per-job options when the class computes an ordering key or a tenant."""
        keyed = ("key" not in self.options and self.job_class.has_ordering_key()) or (
            "tenant" not in self.options and self.job_class.has_tenant()
        )
        return self._options if keyed else None
