"""Job payloads: the JSON object Sidekiq stores, its validation, its timestamps, and the
one parse of its routing fields (:class:`Routing`)."""

from __future__ import annotations

import json
import math
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rfetch.errors import ArgsNotSerializable, InvalidJob, PayloadTooLarge
from rfetch.jobs.options import priority_of

_fast_loads: Callable[[bytes | str], Any]
_fast_dumps: Callable[[Any], bytes] | None
try:  # the optional speed-up extra (pip install 'rfetch[speedups]')
    from orjson import dumps as _fast_dumps
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - depends on the installation
    _fast_loads = json.loads
    _fast_dumps = None

Payload = dict[str, Any]

_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
"""Built once (``json.dumps`` with options builds one per call); stateless, thread-safe."""

MAX_NESTING = 512
"""Levels of arrays and objects a payload may nest (the payload object is level 1): rfetch's
own limit, so validity does not depend on the parser (orjson stops at 1,024 levels, Python's
``json`` near the recursion limit). A push nesting deeper is refused (ArgsNotSerializable); a
stored payload nesting deeper is invalid (InvalidJob: the dead set)."""

MS_THRESHOLD = 100_000_000_000.0
"""Epoch values above this are ms (Sidekiq 8), below s (6/7): 1e11 s is 5138, 1e11 ms 1973."""
_PLAIN = frozenset({str, int, bool, type(None)})  # always valid JSON (a float may be NaN)


def new_jid() -> str:
    """A fresh job id: 24 lowercase hex characters, as Sidekiq's ``SecureRandom.hex(12)``."""
    return secrets.token_hex(12)


def new_jids(count: int) -> list[str]:
    """``count`` fresh jids from one read of the random source (push_bulk)."""
    text = secrets.token_hex(12 * count)
    return [text[i : i + 24] for i in range(0, 24 * count, 24)]


def epoch_seconds(value: Any) -> float | None:
    """Read a Sidekiq timestamp as float epoch seconds.

    Sidekiq 6/7 write float seconds; Sidekiq 8 writes integer milliseconds. Anything that is
    not a number gives None.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    seconds = float(value)
    return seconds / 1000.0 if seconds > MS_THRESHOLD else seconds


def check_args(value: Any, path: str = "args", depth: int = 2) -> None:
    """Raise unless ``value`` is made only of native JSON types, nested at most
    :data:`MAX_NESTING` levels in the payload (``depth``: the level ``value`` is at; a job's
    ``args`` list is at level 2, inside the payload object).

    Raises:
        ArgsNotSerializable: naming the path of the first offending value, e.g.
            ``args[1]['when'] is a datetime``.
    """
    if type(value) is list and depth <= MAX_NESTING and all(type(v) in _PLAIN for v in value):
        return  # most jobs' args, plain scalars, in one pass (push_bulk: profiled)
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ArgsNotSerializable(f"{path} is {value!r}, which JSON cannot represent")
        return
    if isinstance(value, (list, tuple, dict)) and depth > MAX_NESTING:
        raise ArgsNotSerializable(
            f"{path[:60]}... nests arrays and objects deeper than the payload's limit of "
            f"{MAX_NESTING} levels (rfetch.jobs.payload.MAX_NESTING)"
        )
    if isinstance(value, (list, tuple)):
        if isinstance(value, tuple):
            raise ArgsNotSerializable(
                f"{path} is a tuple; pass a list (JSON has no tuples, it would come back as a list)"
            )
        for index, item in enumerate(value):
            check_args(item, f"{path}[{index}]", depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ArgsNotSerializable(
                    f"{path} has a key {key!r} of type {type(key).__name__}; only str keys travel"
                )
            check_args(item, f"{path}[{key!r}]", depth + 1)
        return
    raise ArgsNotSerializable(
        f"{path} is a {type(value).__name__} ({value!r:.80}); only str, int, float, bool, "
        "None, list and dict with str keys can be job arguments"
    )


def _encode(payload: Payload, max_bytes: int) -> tuple[str, int]:
    """Compact JSON text and its UTF-8 size in bytes.

    orjson (the ``speedups`` extra) when installed: about 4x faster than the standard
    encoder, which was a quarter of ``push_bulk``'s time. It writes the same
    compact, non-ASCII-escaping JSON; integers beyond 64 bits, which it refuses, fall back
    to the standard encoder (``check_args`` has already refused NaN and infinities, which
    orjson would write as null).
    """
    if _fast_dumps is not None:
        try:
            data = _fast_dumps(payload)
        except TypeError:
            pass
        else:
            return data.decode("utf-8"), len(data)
    text = _ENCODER.encode(payload)
    return text, (len(text.encode("utf-8")) if len(text) * 4 > max_bytes else len(text))


def dumps(payload: Payload, max_bytes: int) -> str:
    """Serialise a payload compactly.

    Raises:
        PayloadTooLarge: the UTF-8 encoding is longer than ``max_bytes``.
    """
    text, size = _encode(payload, max_bytes)
    if size > max_bytes:
        raise PayloadTooLarge(
            f"job {payload.get('class')} jid={payload.get('jid')} is {size} bytes of JSON, over "
            f"the limit of {max_bytes} bytes; pass an id and load the data in the job instead"
        )
    return text


def loads(raw: bytes | str) -> Payload:
    """Parse a fetched payload and check its shape.

    Raises:
        InvalidJob: not JSON (of any kind: bad syntax, bad UTF-8, nesting too deep to
            parse), not an object, no string ``class``, or ``args`` not a list.
    """
    try:
        job = parse(raw)
    except ValueError as exc:
        raise InvalidJob(f"payload is not valid JSON: {exc}") from None
    if not isinstance(job, dict):
        raise InvalidJob(f"payload is a JSON {type(job).__name__}, not an object")
    if not isinstance(job.get("class"), str) or not job["class"]:
        raise InvalidJob("payload has no 'class' string")
    if not isinstance(job.get("args", []), list):
        raise InvalidJob(f"payload 'args' is a {type(job['args']).__name__}, not a list")
    job.setdefault("args", [])
    if not isinstance(job.get("jid"), str):
        job["jid"] = new_jid()
    return job


def parse(raw: bytes | str) -> Any:
    """The JSON value of a stored payload (orjson when installed, else the standard parser).

    Raises:
        ValueError: not JSON (bad syntax, bad UTF-8), or nested deeper than
            :data:`MAX_NESTING` levels, whichever parser reads it.
    """
    try:
        value = _fast_loads(raw)
    except (ValueError, RecursionError):
        # orjson refuses what Python's json reads (NaN, integers over 64 bits): the
        # standard parser has the last word, so both installations accept the same jobs.
        try:
            value = json.loads(raw)
        except RecursionError:  # deeper than the interpreter's recursion limit
            raise ValueError(f"nested deeper than {MAX_NESTING} levels") from None
    if _brackets(raw) > MAX_NESTING and nesting(value) > MAX_NESTING:
        raise ValueError(f"nested deeper than {MAX_NESTING} levels")
    return value


def _brackets(raw: bytes | str) -> int:
    """Opening brackets in ``raw``, strings included: at least its nesting depth, counted
    in C (a payload can nest no deeper than it has brackets, so most are never walked)."""
    if isinstance(raw, bytes):
        return raw.count(b"[") + raw.count(b"{")
    return raw.count("[") + raw.count("{")


def nesting(value: Any) -> int:
    """Levels of arrays and objects in a parsed JSON value (0 for a scalar), walked without
    recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        deepest = max(deepest, depth)
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return deepest if isinstance(value, (dict, list)) else 0


def describe(raw: bytes | str) -> str:
    """A short printable form of a raw payload for log lines."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    return text if len(text) <= 200 else text[:200] + "..."


GATE_MARKERS = (b'"ordering_key"', b'"unique_key"', b'"tenant"', b'"concurrency_key"')
"""Text without which a payload has no routing field but a priority (``lib/gate.lua``'s
``gate_fields`` looks for the first three; the fourth is a fetch cap's key)."""


def may_be_gated(raw: bytes | str) -> bool:
    """Whether ``raw`` may carry an ordering key, a unique lock, a tenant or a fetch cap's key
    (:data:`GATE_MARKERS`): a plain text search, so payloads without them cost no parse."""
    # Spelled out rather than any(...) over the markers: this runs once per job of a bulk
    # push, where the generator cost more than the searches.
    if isinstance(raw, bytes):
        return (
            b'"ordering_key"' in raw or b'"unique_key"' in raw or b'"tenant"' in raw
            or b'"concurrency_key"' in raw
        )
    return (
        '"ordering_key"' in raw or '"unique_key"' in raw or '"tenant"' in raw
        or '"concurrency_key"' in raw
    )


def may_have_priority(raw: bytes | str) -> bool:
    """Whether ``raw`` may carry a ``priority`` (a plain text search, as :func:`may_be_gated`)."""
    return (b'"priority"' in raw) if isinstance(raw, bytes) else ('"priority"' in raw)


BATCH_MARKER = b'"bid"'
"""Text without which a payload is not in a batch (``bid``, as Sidekiq Pro writes it)."""


def may_be_batched(raw: bytes | str) -> bool:
    """Whether ``raw`` may be a batched job's payload (a text search, as may_be_gated)."""
    return (BATCH_MARKER in raw) if isinstance(raw, bytes) else ('"bid"' in raw)


def _text_field(payload: Mapping[str, Any], name: str) -> str | None:
    value = payload.get(name)
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True, slots=True)
class Routing:
    """A payload's routing fields, read in one place: the answer to "is this job keyed,
    unique, of a tenant, coalesced?" everywhere in rfetch, matching ``lib/gate.lua``'s
    ``gate_fields`` (a field counts only as a non-empty string).

    Attributes:
        jid: the job id ("" when missing).
        queue: the payload's ``queue`` ("" when missing).
        job_class: the payload's ``class`` ("" when missing).
        ordering_key: the ordering key (jobs of one key run one at a time, in order).
        unique: the unique lock's digest (``unique_key``; Sidekiq Enterprise unique jobs).
        tenant: the tenant of a fair queue (deficit round robin across tenants).
        coalesce: ``"last"`` (only the newest waiting job of the key runs), ``True`` (any
            other true value: the waiting jobs of the key run as one batch), else None.
        score: the job's place in a coalesced batch: ``score`` if a number, else ``created_at``
            (kept by a retry), else ``enqueued_at`` (epoch s, or Sidekiq 8's ms), else 0.
        unique_until: end of the unique lock's window, float epoch seconds, or None.
        bid: the batch the job belongs to (Sidekiq Pro batches), or None.
        store_result: seconds to keep the job's recorded outcome (``store_result``), or
            None: such a job's end is written by ``complete.lua`` with its record.
        concurrency_key: the fetch cap's key (at most ``concurrency_limit`` jobs of the key
            are fetched and unfinished at once), or None.
        concurrency_limit: the cap's limit (a positive int), or None.
        priority: -100..100, higher runs first; 0 (default) a job of the queue's list.
    """

    jid: str = ""
    queue: str = ""
    job_class: str = ""
    ordering_key: str | None = None
    unique: str | None = None
    tenant: str | None = None
    coalesce: bool | str | None = None
    score: float = 0.0
    unique_until: float | None = None
    store_result: int | None = None
    bid: str | None = None
    concurrency_key: str | None = None
    concurrency_limit: int | None = None
    priority: int = 0

    @property
    def capped(self) -> bool:
        """Whether the job is under a fetch cap (``lib/cap.lua``): a key with a limit > 0."""
        return self.concurrency_key is not None and self.concurrency_limit is not None

    @property
    def gated(self) -> bool:
        """Whether the job goes through the gate of ``lib/gate.lua`` (or ``lib/cap.lua``)
        when it is pushed, pushed back or moved: it has an ordering key, a unique lock, a
        tenant, a fetch cap or a priority (``lib/priority.lua``)."""
        return (
            self.ordering_key is not None
            or self.unique is not None
            or self.tenant is not None
            or self.capped
            or self.priority != 0
        )

    @property
    def locking(self) -> bool:
        """Whether taking the job out of its list must release something: its ordering key
        (the next job of the key goes out) or its unique lock. Such a job is acknowledged,
        deleted or discarded by ``finish.lua``. A capped job gives its slot back the same
        way."""
        return self.ordering_key is not None or self.unique is not None or self.capped

    @property
    def batched(self) -> bool:
        """Whether the job is in a batch: its acknowledgement, retry-set entry and death
        also count in the batch (``lib/batch.lua``)."""
        return self.bid is not None

    @property
    def coalesced(self) -> bool:
        """Whether the job merges the waiting jobs of its ordering key (``coalesce``)."""
        return self.coalesce is not None and self.ordering_key is not None

    @classmethod
    def of(cls, payload: Mapping[str, Any]) -> Routing:
        """The routing fields of a parsed payload."""
        coalesce = payload.get("coalesce")
        until = payload.get("unique_until")
        return cls(
            jid=_text_field(payload, "jid") or "",
            queue=_text_field(payload, "queue") or "",
            job_class=_text_field(payload, "class") or "",
            ordering_key=_text_field(payload, "ordering_key"),
            unique=_text_field(payload, "unique_key"),
            tenant=_text_field(payload, "tenant"),
            coalesce="last" if coalesce == "last" else (True if coalesce else None),
            score=_batch_score(payload),
            unique_until=epoch_seconds(until),
            store_result=_positive_int(payload.get("store_result")),
            bid=_text_field(payload, "bid"),
            concurrency_key=_text_field(payload, "concurrency_key"),
            concurrency_limit=_limit_field(payload.get("concurrency_limit")),
            priority=priority_of(payload.get("priority")),
        )

    @classmethod
    def parse(cls, raw: bytes | str, fetched: bool = False) -> Routing | None:
        """The routing fields of a stored payload; None for a plain job (no gate field, batch,
        recorded outcome or priority) or not a JSON object. ``fetched``: a priority alone
        is not looked for (a fetch's cost; ``rfetch.store.job_record.put_back_record``)."""
        if (not may_be_gated(raw) and not may_be_batched(raw) and not _may_be_recorded(raw)
                and (fetched or not may_have_priority(raw))):
            return None
        try:
            payload = parse(raw)
        except ValueError:
            return None
        if not isinstance(payload, dict):
            return None
        return cls.of(payload)


RECORD_MARKER = b'"store_result"'
"""Text without which a payload's outcome is not recorded (no JSON parse for plain jobs)."""


def _may_be_recorded(raw: bytes | str) -> bool:
    return (RECORD_MARKER in raw) if isinstance(raw, bytes) else ('"store_result"' in raw)


def _positive_int(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def _limit_field(value: Any) -> int | None:
    """A fetch cap's limit: a positive whole number (as ``lib/cap.lua`` reads it), or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    return int(value) if value >= 1 and value == int(value) else None


def _batch_score(payload: Mapping[str, Any]) -> float:
    score = payload.get("score")
    if isinstance(score, (int, float)) and not isinstance(score, bool):
        return float(score)
    for name in ("created_at", "enqueued_at"):
        seconds = epoch_seconds(payload.get(name))
        if seconds is not None:
            return seconds
    return 0.0
