"""Building the payloads of one ``push_bulk`` call before anything is written: every job
built, checked and through the client middleware, each with its position in the call.

Jobs whose options are all alike and whose fields do not depend on their arguments are
copies of one payload built once (:class:`rfetch.push.client.Client` builds the template).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from rfetch.errors import ConfigError
from rfetch.jobs.options import check_options
from rfetch.jobs.payload import Payload, check_args, new_jids
from rfetch.push.sink import INTERCEPTION


class Builder(Protocol):
    """What a bulk build needs of a client: ``Client.build``."""

    def build(
        self,
        class_name: str,
        args: Sequence[Any],
        options: Mapping[str, Any],
        at: float | None,
        *,
        now: float | None = None,
        jid: str | None = None,
        checked: bool = False,
    ) -> Payload: ...


def bulk_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """A bulk push's options, copied and checked once for all its jobs.

    Raises:
        ConfigError: an unknown option or a bad option value, or ``jid`` given.
    """
    options = dict(options or {})
    if "jid" in options:
        raise ConfigError("jid cannot be given to push_bulk: each job needs its own")
    check_options(options)
    return options


def bulk_template(
    builder: Builder, class_name: str, options: Mapping[str, Any], at: float | None, now: float
) -> Payload | None:
    """The one payload every job of a bulk push copies (its ``args`` and ``jid`` replaced),
    or None when a job's fields may depend on its arguments (a unique digest). The caller
    decides that no per-job options apply (no ``options_for``)."""
    if options.get("unique_for") is not None:
        return None
    return builder.build(class_name, [], options, at, now=now, jid="-", checked=True)


def build_bulk(
    builder: Builder,
    through_middleware: Callable[[Payload], Payload | None],
    class_name: str,
    args_list: Iterable[Sequence[Any]],
    options: Mapping[str, Any] | None,
    at: float | None,
    options_for: Callable[[Sequence[Any]], Mapping[str, Any]] | None,
) -> list[tuple[int, Payload]]:
    """The payloads of a bulk push (see :meth:`rfetch.push.client.Client.prepare_bulk`), each
    with its position in ``args_list``; ``through_middleware`` may drop some.

    Raises:
        ArgsNotSerializable: an argument is not native JSON.
        ConfigError: an unknown option or a bad option value, ``jid`` given, or an item of
            ``args_list`` that is not a list of arguments.
    """
    options = bulk_options(options)
    arg_lists = list(args_list)
    jids = new_jids(len(arg_lists))
    now = INTERCEPTION.now()
    # Jobs whose options are all alike and whose fields do not depend on their
    # arguments (no per-job options, no unique digest) are copies of one payload built
    # once: build() per job was the largest part of a bulk push's own time (profiled).
    template, mutable = None, []
    if options_for is None:
        template = bulk_template(builder, class_name, options, at, now)
    if template is not None:
        # each job gets its own copy of a list or dict field (a middleware may change it)
        mutable = [k for k, v in template.items() if k != "args" and isinstance(v, list | dict)]
    payloads: list[tuple[int, Payload]] = []  # (index in arg_lists, payload)
    for index, (args, jid) in enumerate(zip(arg_lists, jids, strict=True)):
        if template is not None:
            built = template.copy()  # Sidekiq's field order: "args" and "jid" keep theirs
            built["args"] = bulk_item(args, fresh=True)
            built["jid"] = jid
            for name in mutable:
                built[name] = copy.deepcopy(built[name])
        else:
            if not isinstance(args, (list, tuple)):
                raise ConfigError(
                    f"push_bulk takes a list of argument lists; got an item {args!r}"
                )
            own = options if options_for is None else options_for(args)
            if options_for is not None and "jid" in own:
                raise ConfigError("jid cannot be given to push_bulk: each job needs its own")
            built = builder.build(
                class_name, args, own, at, now=now, jid=jid, checked=options_for is None
            )
        payload = through_middleware(built)
        if payload is not None:
            payloads.append((index, payload))
    return payloads


def bulk_item(args: Any, *, fresh: bool = False) -> list[Any]:
    """One item of a bulk push as its job's argument list, checked (``fresh``: always a new
    list, for a payload that keeps it; else the caller's list itself when it is one).

    Raises:
        ConfigError: not a list (or tuple) of arguments.
        ArgsNotSerializable: an argument is not native JSON.
    """
    if not isinstance(args, (list, tuple)):
        raise ConfigError(f"push_bulk takes a list of argument lists; got an item {args!r}")
    listed: list[Any] = list(args) if fresh or type(args) is not list else args
    check_args(listed)
    return listed
