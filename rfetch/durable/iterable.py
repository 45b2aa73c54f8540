"""Iterable jobs: long jobs that resume where they stopped (Sidekiq 7.3's
``Sidekiq::IterableJob``, in Python's idiom, with its data model)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any, ClassVar

from rfetch.durable.iteration import IterationRun
from rfetch.errors import ConfigError
from rfetch.jobs.arity import Arity
from rfetch.jobs.job import Job


class IterableJob(Job):
    """A job that walks an enumerator item by item, checkpointing its cursor::

        class Backfill(rfetch.IterableJob):
            def build_enumerator(self, shop_id: int, *, cursor: int | None):
                return rfetch.durable.enumerators.range_enumerator(0, 100_000, cursor=cursor)

            def each_iteration(self, item: int, shop_id: int) -> None: ...

    ``build_enumerator(*args, cursor)`` returns an iterable of ``(item, cursor)`` pairs;
    ``cursor`` (keyword-only) is None on the first run, else the cursor of the last item
    done, and the enumerator then yields the items *after* it. ``each_iteration(item,
    *args)`` does one item. The state lives in the hash ``it-<jid>`` with Sidekiq 7.3's
    fields (``ex`` executions, ``c`` the JSON cursor, ``rt`` runtime in seconds,
    ``cancelled``), kept 30 days, deleted at completion.

    Options (class attributes): ``checkpoint_interval`` (seconds between two checkpoints,
    default 5.0, as Sidekiq), ``checkpoint_every`` (also checkpoint every that many items;
    default None), ``max_runtime`` (seconds; past it the job checkpoints and goes back to
    its queue, as Sidekiq 8.0.8's maximum runtime; default None). The job's ``timeout``
    limits each item (a hard limit per iteration).

    Every checkpoint is fenced: written only while the job is in this process's private
    list; a refused one (another process owns the job) stops it at once
    (:class:`rfetch.CheckpointRefused`). The job stops at the next item boundary, cursor
    saved, when its worker goes quiet (TSTP, TERM, a recycle) or ``max_runtime`` runs out,
    and goes back to the head of its queue without counting as a retry; a failing item
    fails the job after the cursor of the last item done is saved, so the retry resumes at
    that item; a cancel (``rfetch cancel``, :meth:`cancel`, a ``cancelled`` field written by
    Sidekiq's ``cancel!``) is honoured at the next item.

    Hooks (Sidekiq's): ``on_start`` (first execution), ``on_resume`` (a later one with a
    cursor), ``on_stop`` (every end of an execution), ``on_cancel``, ``on_complete``, and
    ``around_iteration(run)`` (call ``run()`` to do the item).
    """

    __abstract_job__: ClassVar[bool] = True
    """A base to subclass, not a job: no worker registers IterableJob itself."""
    checkpoint_interval: ClassVar[float] = 5.0
    checkpoint_every: ClassVar[int | None] = None
    max_runtime: ClassVar[float | None] = None

    _enumerator_arity: ClassVar[Arity | None] = None
    cancel_requested: bool = False
    """Set by :meth:`cancel`: honoured at the next item boundary."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Check the options when the class is defined.

        Raises:
            ConfigError: a ``checkpoint_interval`` or ``max_runtime`` that is not a positive
                number of seconds, a ``checkpoint_every`` that is not a positive int, a
                ``build_enumerator`` without a keyword-only ``cursor``, an async
                ``each_iteration``.
        """
        super().__init_subclass__(**kwargs)
        name = cls.__qualname__
        for option in ("checkpoint_interval", "max_runtime"):
            value = getattr(cls, option)
            if value is not None and (isinstance(value, bool) or not isinstance(
                value, (int, float)) or not value > 0):
                raise ConfigError(f"{name}.{option} must be a positive number of seconds, "
                                  f"got {value!r}")
        every = cls.checkpoint_every
        if every is not None and (isinstance(every, bool) or not isinstance(every, int)
                                  or every < 1):
            raise ConfigError(f"{name}.checkpoint_every must be a positive int, got {every!r}")
        if cls.build_enumerator is not IterableJob.build_enumerator:
            param = inspect.signature(cls.build_enumerator).parameters.get("cursor")
            if param is None or param.kind is not param.KEYWORD_ONLY:
                raise ConfigError(f"{name}.build_enumerator must take a keyword-only "
                                  "'cursor' parameter: def build_enumerator(self, *args, cursor)")
        if inspect.iscoroutinefunction(cls.each_iteration):
            raise ConfigError(f"{name}.each_iteration must not be async")

    @classmethod
    def check_args(cls, args: Sequence[Any]) -> None:
        """Check at the push that ``build_enumerator(*args, cursor=...)`` fits (its
        signature without ``cursor``), as :meth:`rfetch.Job.check_args` checks ``perform``.

        Raises:
            ArgsMismatch: too few or too many arguments.
        """
        arity = cls.__dict__.get("_enumerator_arity")
        if arity is None:
            read = Arity.of(cls, cls.build_enumerator)
            keywords = tuple(k for k in read.required_keywords if k != "cursor")
            arity = replace(read, required_keywords=keywords,
                            signature=read.signature.replace(", *, cursor", "")
                            .replace("*, cursor", ""), method="build_enumerator")
            cls._enumerator_arity = arity
        arity.check(cls.job_name(), args)

    def perform(self, *args: Any) -> None:
        """Walk the enumerator from the saved cursor (see the class docstring).

        Raises:
            rfetch.JobInterrupted, rfetch.JobCancelled, rfetch.CheckpointRefused: see
                :class:`rfetch.durable.iteration.IterationRun`; what an item raised.
        """
        wrapped = type(self).around_iteration is not IterableJob.around_iteration
        IterationRun(self, args, self.hold, self.control, wrapped=wrapped).run()

    def build_enumerator(self, *args: Any, cursor: Any) -> Iterable[tuple[Any, Any]]:
        """The ``(item, cursor)`` pairs after ``cursor`` (None: from the start)."""
        raise NotImplementedError(f"{type(self).__name__} must define build_enumerator()")

    def each_iteration(self, item: Any, *args: Any) -> None:
        """Do one item; raise to fail the job (the retry resumes at this item)."""
        raise NotImplementedError(f"{type(self).__name__} must define each_iteration()")

    def total(self, *args: Any) -> int | None:
        """The number of items, if known (called once per execution): the progress shown
        on the busy page, by ``rfetch processes`` and the API then has a percent and an ETA."""
        return None

    def around_iteration(self, run: Callable[[], None]) -> None:
        """Wrap one item (a transaction, a log context...): call ``run()`` once."""
        run()

    def cancel(self) -> None:
        """Cancel the job from inside: it stops at the next item boundary, ``cancelled``
        is written to ``it-<jid>`` and ``on_cancel`` runs (Sidekiq 8's ``cancel!``)."""
        self.cancel_requested = True

    def on_start(self) -> None:
        """Called when the first execution starts."""

    def on_resume(self) -> None:
        """Called when a later execution starts from a saved cursor."""

    def on_stop(self) -> None:
        """Called at every end of an execution (completed, interrupted, failed, cancelled)."""

    def on_cancel(self) -> None:
        """Called when a cancel is honoured."""

    def on_complete(self) -> None:
        """Called once the enumerator is exhausted (after ``on_stop``)."""
