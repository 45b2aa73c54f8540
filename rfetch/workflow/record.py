"""A job's recorded outcome (``store_result``): the ``rfetch:result:<jid>`` hash read into
a :class:`Record`. Read by ``rfetch.result`` (:mod:`rfetch.workflow.results`), the API and
the Django tasks backend."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from redis import Redis

from rfetch.errors import JobDied
from rfetch.store.keys import Keys


@dataclass(frozen=True)
class Record:
    """A job's recorded outcome (``rfetch:result:<jid>``).

    Attributes:
        jid: the job.
        status: ``"succeeded"``, ``"dead"`` or ``"cancelled"``.
        value: the return value (success), decoded from JSON.
        error_class, error_message: why it died.
        finished_at: when, float epoch seconds (Redis's clock).
        job_class: the job's class name.
    """

    jid: str
    status: str
    value: Any = None
    error_class: str = ""
    error_message: str = ""
    finished_at: float | None = None
    job_class: str = ""

    @classmethod
    def of(cls, jid: str, fields: Mapping[Any, Any]) -> Record | None:
        """The record of a HGETALL reply; None for an empty one (no record)."""
        f = {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes)
             else v) for k, v in fields.items()}
        if "status" not in f:
            return None
        finished = f.get("finished_at")
        return cls(
            jid,
            f["status"],
            json.loads(f["result"]) if f.get("result") else None,
            f.get("error_class", ""),
            f.get("error_message", ""),
            float(finished) if finished else None,
            f.get("class", ""),
        )

    def value_or_raise(self) -> Any:
        """The return value.

        Raises:
            JobDied: the job died or was cancelled (with its recorded error).
        """
        if self.status == "succeeded":
            return self.value
        raise JobDied(self.jid, self.error_class, self.error_message, self.status)


def read_record(redis: Redis, keys: Keys, jid: str) -> Record | None:
    """The record of ``jid`` now (one HGETALL), or None."""
    return Record.of(jid, redis.hgetall(keys.result(jid)))  # type: ignore[arg-type,unused-ignore]
