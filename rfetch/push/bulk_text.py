"""The JSON texts of a bulk push whose jobs are copies of one template, written without
building a payload per job.

When the jobs' options are all alike, their fields do not depend on their arguments and
no client middleware may change them (:func:`rfetch.push.bulk_build.bulk_template`), every
payload is the template with its own ``args`` and ``jid``. Compact JSON of an object is its
fields' texts in order, so each job's text is the template's fields before ``args``
(encoded once), the job's ``args``, its ``jid``, and the fields after (encoded once): the
same text, byte for byte, that encoding the whole payload gives (orjson, as
:func:`rfetch.jobs.payload.dumps`). Per job this leaves the argument check, one encoding of
the arguments and the size check; building, copying and encoding a dict per job was most
of a bulk push's own time (profiled).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rfetch.config import Config
from rfetch.jobs import payload as wire
from rfetch.jobs.payload import Payload, dumps, may_be_gated, may_have_priority, new_jids
from rfetch.push.buffer import BufferedJob
from rfetch.push.bulk_build import Builder, bulk_item, bulk_options, bulk_template
from rfetch.push.sink import INTERCEPTION

SCALARS = frozenset({str, int, bool, type(None)})
"""Types of an argument always valid in JSON (a float may be NaN): a list of only these
needs no walk (:func:`rfetch.jobs.payload.check_args`'s own first test, without a call)."""


class Splice:
    """One template's text, cut around its ``args`` and ``jid`` fields.

    Args:
        template: the payload of every job (its ``args`` and ``jid`` are replaced), with
            ``at``, which is not stored in the text (the scheduled set's score has it).
    """

    def __init__(self, template: Payload) -> None:
        fields = {k: v for k, v in template.items() if k != "at"}
        names = list(fields)
        where = names.index("args")
        self.head = {k: fields[k] for k in names[:where]}
        self.tail = {k: fields[k] for k in names[where + 2 :]}
        self.queue: str = template["queue"]
        self.at: float | None = template.get("at")
        encode = wire._fast_dumps  # orjson (of() gives a Splice only with it)
        assert encode is not None
        head = encode(self.head)[:-1].decode() if self.head else "{"
        tail = encode(self.tail).decode() if self.tail else "}"
        self.before = head + (',"args":' if self.head else '"args":')
        self.between = ',"jid":"'
        self.after = '"' + ("," + tail[1:] if self.tail else tail)
        fixed = self.before + self.between + self.after
        self.fixed_bytes = len(fixed.encode())
        # Whether no job of this template goes through the gate or has a priority: their
        # routing fields are the template's (arguments are not read for routing).
        self.plain = not (may_be_gated(fixed) or may_have_priority(fixed))

    @classmethod
    def of(cls, template: Payload) -> Splice | None:
        """The splice of ``template``, or None when its texts cannot be cut so (no orjson,
        or ``jid`` does not follow ``args``): each job is then encoded whole."""
        names = [k for k in template if k != "at"]
        if wire._fast_dumps is None or "args" not in names or "after" in template:
            return None
        where = names.index("args")
        if names[where + 1 : where + 2] != ["jid"]:
            return None
        return cls(template)

    def whole(self, args: list[Any], jid: str, max_bytes: int) -> BufferedJob:
        """One job encoded whole, as :func:`rfetch.jobs.payload.dumps` does (an integer
        beyond 64 bits, which orjson refuses, takes the standard encoder).

        Raises:
            PayloadTooLarge: its text is over ``max_bytes`` bytes of UTF-8.
        """
        text = dumps({**self.head, "args": args, "jid": jid, **self.tail}, max_bytes)
        return BufferedJob(self.queue, text, self.at, self.plain)

    def jobs(
        self, arg_lists: Sequence[list[Any]], jids: Sequence[str], max_bytes: int
    ) -> list[BufferedJob]:
        """The serialised jobs of ``arg_lists`` (each already checked) with the jid of the
        same position (fresh jids: 24 hex digits, which JSON writes as they are).

        Raises:
            PayloadTooLarge: a job's text is over ``max_bytes`` bytes of UTF-8.
        """
        encode = wire._fast_dumps
        assert encode is not None  # of() gives a Splice only with orjson
        before, between, after = self.before, self.between, self.after
        queue, at, plain, room = self.queue, self.at, self.plain, max_bytes - self.fixed_bytes
        out: list[BufferedJob] = []
        add = out.append
        for args, jid in zip(arg_lists, jids, strict=True):
            try:
                encoded = encode(args)
            except TypeError:
                add(self.whole(args, jid, max_bytes))
                continue
            if len(encoded) + len(jid) > room:
                self.whole(args, jid, max_bytes)  # raises PayloadTooLarge
            add(BufferedJob(queue, f"{before}{encoded.decode()}{between}{jid}{after}", at, plain))
        return out


def checked_items(arg_lists: Sequence[Any]) -> list[list[Any]]:
    """Every item of a bulk push as its job's argument list, checked
    (:func:`rfetch.push.bulk_build.bulk_item`) before any is encoded, as
    :func:`rfetch.push.bulk_build.build_bulk` checks them.

    Raises:
        ConfigError: an item that is not a list of arguments.
        ArgsNotSerializable: an argument is not native JSON.
    """
    scalar = SCALARS.__contains__
    return [
        args if type(args) is list and all(map(scalar, map(type, args))) else bulk_item(args)
        for args in arg_lists
    ]


def spliced_bulk(
    builder: Builder,
    class_name: str,
    arg_lists: Sequence[Any],
    options: Mapping[str, Any] | None,
    at: float | None,
    config: Config,
) -> tuple[list[str], list[BufferedJob]] | None:
    """The jids and serialised jobs of a bulk push, one per item of ``arg_lists``, when its
    jobs are copies of one template; None when they are not (a unique digest, or a template
    that cannot be cut: see :meth:`Splice.of`), and the caller builds each payload. The
    caller has decided that no client middleware and no per-job options apply.

    Raises:
        ConfigError: an unknown option or a bad option value, ``jid`` given, an item of
            ``arg_lists`` that is not a list of arguments, or options that do not go
            together (:func:`rfetch.jobs.payload_fields.add_option_fields`).
        ArgsNotSerializable: an argument is not native JSON.
        PayloadTooLarge: a job's text is over ``config.max_payload_bytes``.
    """
    checked = bulk_options(options)
    template = bulk_template(builder, class_name, checked, at, INTERCEPTION.now())
    splice = Splice.of(template) if template is not None else None
    if splice is None:
        return None
    jids = new_jids(len(arg_lists))
    return jids, splice.jobs(checked_items(arg_lists), jids, config.max_payload_bytes)
