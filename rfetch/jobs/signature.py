"""Signatures: a job class, its arguments and its options, built now and pushed later.

Celery's word (``add.s(2, 2)``): a workflow (``rfetch.chain``, and batches' ``group`` and
``chord``) is described with signatures before any job is pushed, so the whole workflow can
be written in one atomic step. ``Job.s(...)``, ``JobFunction.s(...)`` and
``JobSetter.s(...)`` make one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from rfetch.errors import ConfigError
from rfetch.jobs.options import JobOptions, Unpack, check_options

if TYPE_CHECKING:
    from rfetch.jobs.job import Job
    from rfetch.push.client import Client

JOB_CLASS_METHODS = ("job_name", "default_options", "check_args")
"""What a job class has (:class:`rfetch.Job`): recognised by these, so that modules below
``rfetch.job`` (batch callbacks, periodic schedules) need not import it."""


def job_class_of(target: object) -> type[Job] | None:
    """The job class of ``target``: a Job subclass, or the class an ``@rfetch.job``
    function wraps (its ``job_class``); None when ``target`` is neither."""
    cls = getattr(target, "job_class", target)
    if isinstance(cls, type) and all(callable(getattr(cls, n, None)) for n in JOB_CLASS_METHODS):
        return cast("type[Job]", cls)
    return None


@dataclass(frozen=True)
class Signature:
    """One job to push later: its class, positional arguments and push options.

    Immutable: :meth:`set` returns a new signature (Celery's ``sig.set(queue=...)``).

    Attributes:
        job_class: the ``rfetch.Job`` subclass.
        args: the positional arguments, as ``perform`` takes them (keyword arguments given
            to ``.s()`` are bound to ``perform``'s parameters then, as ``perform_async``
            does).
        options: push options (``queue``, ``retry``, ``store_result``, ...), on top of the
            class's own.
    """

    job_class: type[Job]
    args: tuple[Any, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        job_class: type[Job],
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        options: Mapping[str, Any] | None = None,
    ) -> Signature:
        """A signature of ``job_class`` with ``args``/``kwargs`` bound to ``perform``'s
        parameters and checked now.

        Raises:
            ArgsMismatch: the arguments do not fit ``perform``.
            ConfigError: an unknown option or a bad option value.
        """
        opts = dict(options or {})
        check_options(opts)
        values = job_class.positional_args(args, kwargs)
        if opts.get("coalesce") is not True:
            job_class.check_args(values)
        return cls(job_class, tuple(values), opts)

    def set(self, **options: Unpack[JobOptions]) -> Signature:
        """This signature with more options (``client=`` is not an option here: give it to
        :meth:`push` or to the workflow).

        Raises:
            ConfigError: an unknown option or a bad option value.
        """
        if "client" in options:
            raise ConfigError("client= is given when the signature is pushed, not to set()")
        merged = {**self.options, **options}
        check_options(merged)
        return Signature(self.job_class, self.args, merged)

    @property
    def name(self) -> str:
        """The registered job name of the class."""
        return self.job_class.job_name()

    def push(self, client: Client | None = None) -> str | None:
        """Push the job now (``perform_async`` with these options); its jid, or None when
        client middleware dropped it or a unique lock is held.

        Raises:
            as :meth:`rfetch.jobs.job_setter.JobSetter.perform_async`.
        """
        setter = self.job_class.set(**self.options, client=client)
        return setter.perform_async(*self.args)

    def __repr__(self) -> str:
        args = ", ".join(repr(a) for a in self.args)
        opts = "".join(f", {k}={v!r}" for k, v in self.options.items())
        return f"{self.name}.s({args}){'.set(' + opts[2:] + ')' if opts else ''}"
