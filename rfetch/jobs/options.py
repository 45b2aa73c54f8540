"""Job options (Sidekiq's, and rfetch's ordering keys, tenants, coalescing and unique
jobs): which exist, their checks, and the unique lock's digest."""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict

from rfetch.errors import ConfigError
from rfetch.jobs.workflow_options import check_workflow_options

if sys.version_info >= (3, 11):
    from typing import Unpack
else:  # pragma: no cover - Python 3.10
    from typing_extensions import Unpack

if TYPE_CHECKING:
    from rfetch.push.client import Client

__all__ = ["JOB_OPTIONS", "JobOptions", "SetOptions", "Unpack", "check_options", "unique_digest"]


class HasBid(Protocol):
    """A batch (``rfetch.Batch``), given as ``after=``: its ``bid`` is what is stored."""

    @property
    def bid(self) -> str: ...


class JobOptions(TypedDict, total=False):
    """The push options, typed: ``Job.set(**options)`` and ``Signature.set`` take these
    (PEP 692 ``**kwargs: Unpack[JobOptions]``), so a type checker flags an unknown option or
    a value of the wrong type where the push is written; :func:`check_options` checks the
    same at run time. Durations are seconds."""

    queue: str
    retry: bool | int
    dead: bool
    backtrace: bool | int
    retry_queue: str
    tags: list[str] | tuple[str, ...]
    jid: str
    key: str
    unique_for: float
    unique_key: str
    tenant: str
    coalesce: bool | Literal["last"]
    score: float
    timeout: float
    store_result: int
    after: str | HasBid
    after_outcome: Literal["success", "complete"]
    on_dependency_death: Literal["dead", "cancel"]
    concurrency_key: str
    concurrency_limit: int
    expires_in: float
    priority: int


class SetOptions(JobOptions, total=False):
    """What ``Job.set`` takes: the push options and ``client`` (a Client other than the
    process-wide default)."""

    client: Client | None

JOB_OPTIONS = frozenset(
    {
        "queue", "retry", "dead", "backtrace", "retry_queue", "tags", "jid",
        "key", "unique_for", "unique_key", "tenant", "coalesce", "score", "timeout",
        "store_result", "after", "after_outcome", "on_dependency_death",
        "concurrency_key", "concurrency_limit", "expires_in", "priority",
    }
)
"""Options that travel in the payload (Sidekiq's names, and rfetch's ``key`` (ordering key,
stored as ``ordering_key``), ``tenant``, ``coalesce``, ``score``, ``unique_for`` and
``unique_key``, and the workflow options ``store_result``, ``after``, ``after_outcome`` and
``on_dependency_death``, see :mod:`rfetch.jobs.workflow_options`)."""

MAX_ORDERING_KEY = 1000
"""Characters allowed in an ordering key (it is part of a Redis key name)."""


def check_options(options: Mapping[str, Any]) -> None:
    """Raise ConfigError for an unknown option or a value of the wrong type."""
    unknown = set(options) - JOB_OPTIONS
    if unknown:
        raise ConfigError(
            f"unknown job option(s) {sorted(unknown)}; known: {sorted(JOB_OPTIONS)}"
        )
    queue = options.get("queue")
    if queue is not None and (not isinstance(queue, str) or not queue):
        raise ConfigError(f"queue must be a non-empty string, got {queue!r}")
    retry = options.get("retry")
    if retry is not None and not isinstance(retry, (bool, int)):
        raise ConfigError(f"retry must be True, False or a number of retries, got {retry!r}")
    if isinstance(retry, int) and not isinstance(retry, bool) and retry < 0:
        raise ConfigError(f"retry must not be negative, got {retry}")
    _check_ordering_options(options)
    check_workflow_options(options)
    _check_flow_options(options)
    check_priority(options)
    timeout = options.get("timeout")
    if timeout is not None and (
        not isinstance(timeout, (int, float))
        or isinstance(timeout, bool)
        or not 0 < timeout < float("inf")
    ):
        raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
    tags = options.get("tags")
    if tags is not None and (
        not isinstance(tags, (list, tuple)) or not all(isinstance(t, str) for t in tags)
    ):
        raise ConfigError(f"tags must be a list of strings, got {tags!r}")


def _check_ordering_options(options: Mapping[str, Any]) -> None:
    """The options of ordering keys, fair tenants, coalescing and unique jobs: ``key``,
    ``tenant``, ``coalesce``, ``score``, ``unique_for``, ``unique_key``."""
    key = options.get("key")
    if key is not None:
        if not isinstance(key, str) or not key:
            raise ConfigError(f"key (ordering key) must be a non-empty string, got {key!r}")
        if len(key) > MAX_ORDERING_KEY:
            raise ConfigError(
                f"key (ordering key) is {len(key)} characters; at most {MAX_ORDERING_KEY}"
            )
        if options.get("retry_queue"):
            raise ConfigError(
                "retry_queue cannot be used with an ordering key: the key's order is kept "
                "within one queue, and a retry must come back to the same queue"
            )
    coalesce = options.get("coalesce")
    if coalesce not in (None, False, True, "last"):
        raise ConfigError(f'coalesce must be True, "last" or False, got {coalesce!r}')
    score = options.get("score")
    if score is not None and (
        isinstance(score, bool) or not isinstance(score, (int, float)) or score != score
    ):
        raise ConfigError(f"score must be a number, got {score!r}")
    tenant = options.get("tenant")
    if tenant is not None and (
        not isinstance(tenant, str) or not tenant or "|" in tenant or len(tenant) > MAX_ORDERING_KEY
    ):
        raise ConfigError(
            f"tenant must be a non-empty string without '|' of at most {MAX_ORDERING_KEY} "
            f"characters, got {tenant!r}"
        )
    unique_for = options.get("unique_for")
    if unique_for is not None and (
        isinstance(unique_for, bool)
        or not isinstance(unique_for, (int, float))
        or not unique_for > 0
        or unique_for == float("inf")
    ):
        raise ConfigError(f"unique_for must be a positive number of seconds, got {unique_for!r}")
    unique_key = options.get("unique_key")
    if unique_key is not None:
        if not isinstance(unique_key, str) or not unique_key:
            raise ConfigError(f"unique_key must be a non-empty string, got {unique_key!r}")
        if unique_for is None:
            raise ConfigError("unique_key needs unique_for (the lock's window, in seconds)")


def _check_flow_options(options: Mapping[str, Any]) -> None:
    """The options of fetch caps and expiring jobs (docs/flow-control.md):
    ``concurrency_key`` with ``concurrency_limit``, and ``expires_in``."""
    key, limit = options.get("concurrency_key"), options.get("concurrency_limit")
    if key is not None or limit is not None:
        if not isinstance(key, str) or not key or "|" in key or len(key) > MAX_ORDERING_KEY:
            raise ConfigError(
                "concurrency_key must be a non-empty string without '|' of at most "
                f"{MAX_ORDERING_KEY} characters (with concurrency_limit), got {key!r}"
            )
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ConfigError(
                f"concurrency_limit must be a whole number >= 1 (with concurrency_key), "
                f"got {limit!r}"
            )
        for other in ("key", "tenant"):
            if options.get(other) is not None:
                raise ConfigError(
                    f"concurrency_key cannot be combined with {other}=: an ordering key is "
                    "already a cap of 1 (in order), and capped jobs are served round robin "
                    "by concurrency key (use the tenant as the concurrency key)"
                )
    expires_in = options.get("expires_in")
    if expires_in is not None and (
        isinstance(expires_in, bool)
        or not isinstance(expires_in, (int, float))
        or not 0 < expires_in < float("inf")
    ):
        raise ConfigError(f"expires_in must be a positive number of seconds, got {expires_in!r}")


MIN_PRIORITY = -100
"""The lowest priority a job may have (Django's ``TASK_MIN_PRIORITY``)."""

MAX_PRIORITY = 100
"""The highest priority a job may have (Django's ``TASK_MAX_PRIORITY``)."""

_NOT_WITH_PRIORITY = {
    "tenant": "tenant jobs wait in their tenant's list, served round robin, not by priority",
    "concurrency_key": "capped jobs wait in their concurrency key's list, not by priority",
    "after": "a job waiting on another is released to its queue's list, without its priority",
}


def priority_of(value: Any) -> int:
    """A stored payload's priority as rfetch reads it (``lib/priority.lua`` the same): a
    whole number from :data:`MIN_PRIORITY` to :data:`MAX_PRIORITY` (``5.0`` too: Lua's
    cjson reads numbers as doubles), anything else 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return 0
    return int(value) if MIN_PRIORITY <= value <= MAX_PRIORITY and value == int(value) else 0


def check_priority(options: Mapping[str, Any]) -> None:
    """``priority``: a whole number from :data:`MIN_PRIORITY` to :data:`MAX_PRIORITY`
    (higher runs first; 0, the default, is a plain job of the queue's list), and not with
    an option whose job waits elsewhere than its queue (docs/ordering.md, "Priorities").

    Raises:
        ConfigError: a bool, a non-integer, a value out of range, or a combination that
            would lose the priority.
    """
    priority = options.get("priority")
    if priority is None:
        return
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise ConfigError(
            f"priority must be a whole number from {MIN_PRIORITY} to {MAX_PRIORITY} "
            f"(higher runs first), got {priority!r} ({type(priority).__name__})"
        )
    if not MIN_PRIORITY <= priority <= MAX_PRIORITY:
        raise ConfigError(
            f"priority must be from {MIN_PRIORITY} to {MAX_PRIORITY} (higher runs first), "
            f"got {priority}"
        )
    for other, why in _NOT_WITH_PRIORITY.items():
        if priority != 0 and options.get(other) is not None:
            raise ConfigError(f"priority cannot be combined with {other}=: {why}")


def unique_digest(class_name: str, queue: str, args: Sequence[Any], unique_key: str | None) -> str:
    """The unique lock's name part: sha256 hex of ``unique_key`` if given, else of the
    canonical JSON of (class, queue, args) (sorted object keys), so equal arguments give
    the same lock whatever their dict order."""
    if unique_key is not None:
        material = "key:" + unique_key
    else:
        material = json.dumps(
            [class_name, queue, list(args)], sort_keys=True, separators=(",", ":")
        )
    return hashlib.sha256(material.encode("utf-8")).hexdigest()
