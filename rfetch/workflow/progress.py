"""Progress of a running job: ``self.progress(percent, message)`` writes one TTL'd key
(one SET), read by the web UI's busy page, the API and ``rfetch processes``."""

from __future__ import annotations

import json
import logging
import math
import time

from redis import Redis

from rfetch.errors import ConfigError
from rfetch.store.connection import REDIS_DOWN
from rfetch.store.keys import Keys

log = logging.getLogger("rfetch.progress")

PROGRESS_TTL = 3600
"""Seconds a progress report is kept after it was written."""

MAX_MESSAGE = 1000
"""Characters of a progress message kept."""


def check_progress(percent: float, message: str) -> None:
    """Raise ConfigError unless ``percent`` is a number in 0..100 and ``message`` a string."""
    if (
        isinstance(percent, bool)
        or not isinstance(percent, (int, float))
        or not math.isfinite(percent)
        or not 0 <= percent <= 100
    ):
        raise ConfigError(f"progress percent must be a number in 0..100, got {percent!r}")
    if not isinstance(message, str):
        raise ConfigError(f"progress message must be a string, got {message!r}")


class ProgressWriter:
    """Writes running jobs' progress (``rfetch:progress:<jid>``, JSON ``{percent, message,
    at}``, TTL ``PROGRESS_TTL``): one SET per report.

    Args:
        redis: the worker's client.
        keys: key names of the namespace.
    """

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys

    def write(self, jid: str, percent: float, message: str) -> None:
        """Record the progress of ``jid``; a Redis error is logged, never raised into the
        job (progress is advisory).

        Raises:
            ConfigError: a percent outside 0..100 or a message that is not a string.
        """
        check_progress(percent, message)
        value = json.dumps(
            {"percent": float(percent), "message": message[:MAX_MESSAGE], "at": time.time()}
        )
        try:
            self.redis.set(self.keys.progress(jid), value, ex=PROGRESS_TTL)
        except REDIS_DOWN as exc:
            log.warning("progress of jid=%s not written: %s", jid, exc)
