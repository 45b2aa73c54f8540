"""``@rfetch.job``: a plain function made into a job."""

from __future__ import annotations

import datetime as dt
import functools
import inspect
from collections.abc import Callable, Iterable
from typing import Any, Generic, ParamSpec, TypeVar, overload

from rfetch.errors import ConfigError
from rfetch.jobs.job import Job
from rfetch.jobs.job_setter import BulkItem, JobSetter
from rfetch.jobs.options import SetOptions, Unpack, check_options
from rfetch.jobs.signature import Signature

P = ParamSpec("P")
R = TypeVar("R")


class JobFunction(Generic[P, R]):
    """A plain function made into a job by ``@rfetch.job``; calling it runs it inline.

    Its push methods are typed from the function's signature (ParamSpec ``P``).
    """

    def __init__(self, func: Callable[P, R], job_class: type[Job]) -> None:
        functools.update_wrapper(self, func)
        self.func = func
        self.job_class = job_class

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(*args, **kwargs)

    def set(self, **options: Unpack[SetOptions]) -> JobSetter[P]:
        """Override options for one push (see :meth:`rfetch.Job.set`).

        Raises:
            ConfigError: an unknown option or a bad option value.
        """
        client = options.pop("client", None)
        return JobSetter(self.job_class, options, client)

    def s(self, *args: P.args, **kwargs: P.kwargs) -> Signature:
        """A signature of the job (see :meth:`rfetch.Job.s`)."""
        return Signature.of(self.job_class, args, kwargs)

    def perform_async(self, *args: P.args, **kwargs: P.kwargs) -> str | None:
        """Enqueue now; returns the jid."""
        return self.set().perform_async(*args, **kwargs)

    def perform_in(
        self, interval: dt.timedelta | float, /, *args: P.args, **kwargs: P.kwargs
    ) -> str | None:
        """Enqueue to run after ``interval``."""
        return self.set().perform_in(interval, *args, **kwargs)

    def perform_at(
        self, when: dt.datetime | float, /, *args: P.args, **kwargs: P.kwargs
    ) -> str | None:
        """Enqueue to run at ``when``."""
        return self.set().perform_at(when, *args, **kwargs)

    def perform_bulk(
        self, args_list: Iterable[BulkItem], batch_size: int | None = None
    ) -> list[str]:
        """Enqueue many jobs, all or none (see :meth:`Job.perform_bulk`)."""
        return self.job_class.perform_bulk(args_list, batch_size)

    async def aperform_async(self, *args: P.args, **kwargs: P.kwargs) -> str | None:
        """:meth:`perform_async` for asyncio code."""
        return await self.set().aperform_async(*args, **kwargs)

    async def aperform_in(
        self, interval: dt.timedelta | float, /, *args: P.args, **kwargs: P.kwargs
    ) -> str | None:
        """:meth:`perform_in` for asyncio code."""
        return await self.set().aperform_in(interval, *args, **kwargs)

    async def aperform_at(
        self, when: dt.datetime | float, /, *args: P.args, **kwargs: P.kwargs
    ) -> str | None:
        """:meth:`perform_at` for asyncio code."""
        return await self.set().aperform_at(when, *args, **kwargs)

    async def aperform_bulk(
        self, args_list: Iterable[BulkItem], batch_size: int | None = None
    ) -> list[str]:
        """:meth:`perform_bulk` for asyncio code."""
        return await self.job_class.aperform_bulk(args_list, batch_size)


@overload
def job(func: Callable[P, R], /) -> JobFunction[P, R]: ...


@overload
def job(
    func: None = None, /, **options: Any
) -> Callable[[Callable[P, R]], JobFunction[P, R]]: ...


def job(
    func: Callable[P, R] | None = None, /, **options: Any
) -> JobFunction[P, R] | Callable[[Callable[P, R]], JobFunction[P, R]]:
    """Make a plain function a job: ``@rfetch.job`` or ``@rfetch.job(queue="mail", retry=3)``.

    The job is registered as ``module.function_name`` unless ``name=`` is given.
    ``cron=`` (and ``cron_tz=``) makes it a periodic job, pushed without arguments at every
    tick (see :class:`rfetch.Job`); the expression is checked when a worker starts.

    Raises:
        ConfigError: an unknown option.
    """
    name = options.pop("name", None)
    periodic: dict[str, Any] = {k: options.pop(k) for k in ("cron", "cron_tz") if k in options}
    check_options(options)
    per_push = {"key", "tenant", "unique_key", "after"} & set(options)
    if per_push:
        raise ConfigError(
            f"{sorted(per_push)} differ per job: pass them with .set(...) at push time"
        )

    def wrap(fn: Callable[P, R]) -> JobFunction[P, R]:
        # The return value is kept: a store_result job records it.
        async def perform_awaited(self: Job, *args: Any) -> object:
            return await fn(*args)  # type: ignore[call-arg,misc]

        def perform_called(self: Job, *args: Any) -> object:
            return fn(*args)  # type: ignore[call-arg]

        perform: Callable[..., object] = (
            perform_awaited if inspect.iscoroutinefunction(fn) else perform_called
        )
        # Job.positional_args binds keyword arguments against the function's own
        # parameters, behind the ``self`` every method has.
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
