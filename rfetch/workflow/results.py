"""Reading recorded outcomes: ``rfetch.result(jid, timeout=...)`` and ``await
rfetch.aresult(...)`` (Celery's ``AsyncResult.get``, RQ's ``job.result``).

A waiter never polls: it reads the record, then blocks on the job's wake list (``BLMOVE``
of the list onto itself, so the token stays for every other waiter) until ``complete.lua``
or ``depend.lua`` pushes the token with the record, or the timeout ends. A blocking call
lasts at most 80% of ``network_timeout`` (the client's socket timeout), so a long wait is a
few blocking calls, each ended by the wake or its own timeout.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from rfetch.api import Api
from rfetch.errors import ConfigError, ResultTimeout, UnknownResult
from rfetch.push.client import DEFAULT, Client
from rfetch.workflow.record import Record, read_record


def _client(client: Client | None) -> Client:
    found = client if client is not None else DEFAULT.get()
    if len(found.deliveries) > 1:
        raise ConfigError(
            "rfetch.result reads one Redis, and this client has shards: pass a Client of the "
            "job's shard (rfetch.push.shards.shard_config)"
        )
    return found


def _check(jid: str, timeout: float) -> None:
    if not isinstance(jid, str) or not jid:
        raise ConfigError(f"a jid is a non-empty string, got {jid!r}")
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout < 0:
        raise ConfigError(f"timeout must be seconds >= 0, got {timeout!r}")


def _timed_out(client: Client, jid: str, timeout: float) -> ResultTimeout:
    """The error after a wait with no record: where the job is, if anywhere (explain)."""
    found = Api(client.config, redis=client.redis).explain(jid, max_scan=10_000)
    if not found.found:
        return UnknownResult(
            f"no result for jid {jid} after {timeout:g} s, and the job is nowhere (no record: "
            "never pushed with store_result, or its record expired)"
        )
    return ResultTimeout(f"no result for jid {jid} after {timeout:g} s: {found.summary}")


def result(jid: str, timeout: float = 30.0, client: Client | None = None) -> Any:
    """Wait up to ``timeout`` seconds for the job ``jid`` (pushed with ``store_result``)
    to end, and return its return value.

    Args:
        jid: the job's jid.
        timeout: seconds to wait (0: look once).
        client: the Client whose Redis to read (default: the process-wide one).

    Raises:
        JobDied: the job died (dead set, discarded, cancelled, or its dependency died),
            with its recorded error class and message.
        ResultTimeout: no outcome within ``timeout``; the message says where the job is.
        UnknownResult: no outcome within ``timeout`` and the jid is nowhere.
        ConfigError: a bad jid or timeout, or a client of several shards.
    """
    _check(jid, timeout)
    client = _client(client)
    keys, redis = client.keys, client.redis
    deadline = time.monotonic() + timeout
    chunk = max(0.1, client.config.network_timeout * 0.8)
    while True:
        record = read_record(redis, keys, jid)
        if record is not None:
            return record.value_or_raise()
        left = deadline - time.monotonic()
        if left <= 0:
            raise _timed_out(client, jid, timeout)
        wake = keys.result_wake(jid)
        wait = max(0.01, min(left, chunk))
        redis.blmove(wake, wake, wait, "RIGHT", "LEFT")  # type: ignore[arg-type]


async def aresult(jid: str, timeout: float = 30.0, client: Client | None = None) -> Any:
    """:func:`result` from asyncio code, on ``redis.asyncio`` (the client's asyncio
    connection of the running loop, ``client.aio.connection()``); the same errors."""
    _check(jid, timeout)
    client = _client(client)
    keys = client.keys
    redis = client.aio.connection()
    deadline = time.monotonic() + timeout
    chunk = max(0.1, client.config.network_timeout * 0.8)
    while True:
        record = Record.of(jid, await redis.hgetall(keys.result(jid)))
        if record is not None:
            return record.value_or_raise()
        left = deadline - time.monotonic()
        if left <= 0:
            raise await asyncio.to_thread(_timed_out, client, jid, timeout)
        wake = keys.result_wake(jid)
        wait = max(0.01, min(left, chunk))
        await redis.blmove(wake, wake, wait, "RIGHT", "LEFT")  # type: ignore[arg-type]
