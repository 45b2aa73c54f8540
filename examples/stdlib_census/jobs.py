"""The census job: one file of the Python standard library -> its line count and SHA-256.

Workers load this module with ``rfetch worker -r jobs -q census`` (run from this folder), so
the job is registered as ``jobs.CountFile``, the name ``run.py`` pushes under.

Results go to the hash ``<namespace>:census:results`` as ``<relative path> -> "<lines>
<sha256>"``. Writing a value that depends only on the file makes the job idempotent: a job
that was running when its worker pushed it back at shutdown (``-t 0``) and runs again on
another worker writes the same value twice. Two diagnostic hashes record which worker
process stored each file last (``census:by``) and how many times each file was run
(``census:runs``), so the driver can show where pushed-back jobs finished.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import redis

import rfetch

_lock = threading.Lock()
_clients: dict[str, redis.Redis] = {}


def census_keys(namespace: str | None) -> tuple[str, str, str]:
    """The ``(results, by, runs)`` hash keys under ``namespace``."""
    prefix = f"{namespace}:" if namespace else ""
    return f"{prefix}census:results", f"{prefix}census:by", f"{prefix}census:runs"


def _redis(url: str) -> redis.Redis:
    """One client (and connection pool) per URL per process, shared by the worker threads."""
    with _lock:
        client = _clients.get(url)
        if client is None:
            client = _clients[url] = redis.Redis.from_url(url)
        return client


class CountFile(rfetch.Job):
    """Count the lines of one file and hash it.

    ``perform(root, relative)``: ``root`` is the standard library folder, ``relative`` the
    file's path under it (both str). Lines are counted as binary file iteration yields them:
    every ``\\n``-terminated line, plus a last line without ``\\n`` if the file has one.
    """

    queue = "census"
    retry = 3

    def perform(self, root: str, relative: str) -> None:
        data = (Path(root) / relative).read_bytes()
        lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
        digest = hashlib.sha256(data).hexdigest()
        # The worker's own settings: REDIS_URL and RFETCH_NAMESPACE, as `rfetch worker` reads.
        config = rfetch.Config.from_env()
        results, by, runs = census_keys(config.namespace)
        pipe = _redis(config.redis_url).pipeline(transaction=True)
        pipe.hset(results, relative, f"{lines} {digest}")
        pipe.hset(by, relative, os.getpid())
        pipe.hincrby(runs, relative, 1)
        pipe.execute()
