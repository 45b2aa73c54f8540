"""What the worker writes about a Django task's attempts, beside rfetch's own record of its
outcome (``store_result``): which task it is, its arguments, when each attempt started, on
which worker, and the traceback of each failure. Django's ``TaskResult`` has all of these;
rfetch's record keeps only the outcome. One hash per task, ``rfetch:django-task:<jid>``,
written only by the worker (never at enqueue: a rolled-back enqueue leaves nothing in Redis).

The hash is written before the task runs and again when the attempt ends, so it exists
whenever the record does (the record is written after the attempt, with the job's
acknowledgement), and it is kept an hour longer than the record.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from redis import Redis
from redis.typing import EncodableT, FieldT

from rfetch.store.keys import Keys

MARGIN = 3600
"""Seconds the hash outlives the record written after it."""


@dataclass(frozen=True)
class Attempts:
    """A Django task's attempts as the worker recorded them.

    Attributes:
        task: the task's module path (``myapp.tasks.send_mail``).
        args, kwargs: its arguments.
        enqueued_at, started_at, last_attempted_at: float epoch seconds (None: unknown).
        worker_ids: the worker of each attempt (``host:pid``), oldest first.
        errors: ``{"exception_class_path", "traceback"}`` of each failed attempt.
        state: ``"running"``, ``"failed"`` (the attempt raised; a retry may follow) or
            ``"finished"``.
    """

    task: str
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    enqueued_at: float | None = None
    started_at: float | None = None
    last_attempted_at: float | None = None
    worker_ids: list[str] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)
    state: str = ""

    @classmethod
    def of(cls, fields: Mapping[Any, Any]) -> Attempts | None:
        """The attempts of a HGETALL reply; None for an empty or foreign one."""
        f = {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes)
             else v) for k, v in fields.items()}
        if "task" not in f:
            return None
        try:
            return cls(
                task=f["task"],
                args=list(json.loads(f.get("args") or "[]")),
                kwargs=dict(json.loads(f.get("kwargs") or "{}")),
                enqueued_at=_float(f.get("enqueued_at")),
                started_at=_float(f.get("started_at")),
                last_attempted_at=_float(f.get("last_attempted_at")),
                worker_ids=list(json.loads(f.get("worker_ids") or "[]")),
                errors=list(json.loads(f.get("errors") or "[]")),
                state=f.get("state", ""),
            )
        except (ValueError, TypeError):
            return None


def _float(value: str | None) -> float | None:
    return float(value) if value else None


class TaskRuns:
    """Reads and writes the attempts hash of Django tasks.

    Args:
        redis: a client of the Redis the tasks are pushed to.
        keys: the key names of its namespace.
    """

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys

    def read(self, jid: str) -> Attempts | None:
        """The attempts of ``jid`` (one HGETALL), or None when no attempt started."""
        reply: Mapping[Any, Any] = self.redis.hgetall(self.keys.django_task(jid))
        return Attempts.of(reply)

    def started(self, jid: str, attempts: Attempts, ttl: int) -> None:
        """Record the start of an attempt: ``attempts`` as they are now (the caller appended
        this attempt's worker and time), state ``running``; kept ``ttl`` + :data:`MARGIN`
        seconds.

        Raises:
            redis.exceptions.RedisError: not written (the attempt must not run unrecorded).
        """
        self._write(jid, attempts, "running", ttl)

    def ended(self, jid: str, attempts: Attempts, state: str, ttl: int) -> None:
        """Record the end of an attempt (``state`` ``"failed"`` or ``"finished"``).

        Raises:
            redis.exceptions.RedisError: not written.
        """
        self._write(jid, attempts, state, ttl)

    def _write(self, jid: str, a: Attempts, state: str, ttl: int) -> None:
        key = self.keys.django_task(jid)
        mapping: dict[FieldT, EncodableT] = {
            "task": a.task,
            "args": json.dumps(a.args),
            "kwargs": json.dumps(a.kwargs),
            "worker_ids": json.dumps(a.worker_ids),
            "errors": json.dumps(a.errors),
            "state": state,
        }
        for name in ("enqueued_at", "started_at", "last_attempted_at"):
            value = getattr(a, name)
            if value is not None:
                mapping[name] = repr(float(value))
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(key, mapping=mapping)
        pipe.expire(key, ttl + MARGIN)
        pipe.execute()
