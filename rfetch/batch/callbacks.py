"""A batch's callbacks (Sidekiq Pro's ``on(:success | :complete | :death, Class, options)``),
stored as payload templates that ``lib/batch.lua`` pushes when the event fires."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, Union

from rfetch.errors import ConfigError
from rfetch.jobs.payload import check_args
from rfetch.jobs.signature import Signature
from rfetch.jobs.signature import job_class_of as signature_job_class

if TYPE_CHECKING:
    from rfetch.jobs.job import Job
    from rfetch.jobs.job_function import JobFunction
    from rfetch.push.client import Client
Event = Literal["success", "complete", "death"]
EVENTS: tuple[Event, ...] = ("complete", "success", "death")

JobClass = Union["type[Job]", "JobFunction[Any, Any]"]
CallbackSpec = Union[JobClass, "tuple[JobClass, Mapping[str, Any]]", "Signature"]
"""A callback: a job class (or ``@rfetch.job`` function), ``(class, options)``, or a
:class:`rfetch.Signature` (a chord's callback: ``perform(self, status, *its args)``)."""


def job_class_of(target: object) -> type[Job]:
    """The Job class of a job class or ``@rfetch.job`` function.

    Raises:
        ConfigError: ``target`` is neither.
    """
    cls = signature_job_class(target)
    if cls is None:
        raise ConfigError(
            f"a batch callback must be a job class or @rfetch.job function, not {target!r}"
        )
    return cls


def callback_fields(client: Client, event: Event, spec: CallbackSpec) -> dict[str, str]:
    """The batch hash fields of one callback: ``cb_<event>`` (its payload without ``args``
    and ``enqueued_at``, jid chosen now, so it is pushed once with that jid) and
    ``cbargs_<event>`` (its arguments after the status, as JSON without the brackets).

    A class, or ``(class, options)``: ``perform(self, status, options)`` (Sidekiq Pro's
    callbacks; options ``{}`` when not given). A :class:`rfetch.Signature` (a chord's body):
    ``perform(self, *args)`` with the signature's own arguments only, pushed with its
    options (as ``rfetch.chain`` passes no result: Celery's immutable ``.si()``); then
    ``cbplain_<event>`` is set too.

    Raises:
        ConfigError: not a job class, options not a dict, or the class has an ordering
            key, a tenant or a unique lock (a callback is pushed as a plain job).
        ArgsNotSerializable: the options are not native JSON.
        ArgsMismatch: ``perform`` does not take those arguments.
    """

    push_options: dict[str, Any] = {}
    plain = isinstance(spec, Signature)
    if isinstance(spec, Signature):  # its arguments were checked by Job.s()
        cls, trailing = spec.job_class, list(spec.args)
        push_options = dict(spec.options)
    else:
        target, options = spec if isinstance(spec, tuple) else (spec, {})
        cls = job_class_of(target)
        if not isinstance(options, Mapping):
            raise ConfigError(f"the options of a batch's {event} callback must be a dict")
        trailing = [dict(options)]
        check_args(trailing)
        cls.check_args([{}, *trailing])
    payload = client.build(cls.job_name(), [], {**cls.default_options(), **push_options}, None)
    for name in ("ordering_key", "tenant", "unique_key", "coalesce", "after", "store_result",
                 "priority"):
        if name in payload:
            raise ConfigError(
                f"batch callback {cls.job_name()} has {name}: a callback is pushed as a plain "
                "job, with no ordering key, tenant, unique lock, coalescing, dependency, "
                "recorded result or priority"
            )
    payload.pop("args", None)
    payload.pop("enqueued_at", None)
    rest = json.dumps(trailing, separators=(",", ":"))[1:-1]
    fields = {f"cb_{event}": json.dumps(payload), f"cbargs_{event}": rest}
    if plain:
        fields[f"cbplain_{event}"] = "1"
    return fields
