"""The payload fields that job options add (Sidekiq's field names and rfetch's own), one
place for the sync, asyncio and bulk pushes (:meth:`rfetch.Client.build`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rfetch.errors import ConfigError
from rfetch.jobs.options import check_priority, unique_digest
from rfetch.jobs.payload import Payload
from rfetch.jobs.workflow_options import WORKFLOW_FIELDS


def add_option_fields(
    payload: Payload, options: Mapping[str, Any], at: float | None, now: float
) -> None:
    """Add the fields of ``options`` (already checked) to ``payload`` (its ``class``,
    ``queue`` and ``args`` set): retry and workflow options, tags, the ordering key and
    coalescing, score, tenant, fetch cap, expiry, priority and unique lock.

    Args:
        at: the run time (float epoch seconds), or None to run now.
        now: the push time (float epoch seconds); expiry and unique windows count from
            the later of ``now`` and ``at``.

    Raises:
        ConfigError: ``coalesce`` without an ordering key; a priority with a tenant, a
            fetch cap or a dependency (the class's hooks and attributes included).
    """
    for name in ("dead", "backtrace", "retry_queue", "timeout", *WORKFLOW_FIELDS):
        if options.get(name) is not None:
            payload[name] = options[name]
    if options.get("tags"):
        payload["tags"] = list(options["tags"])
    if options.get("key") is not None:
        payload["ordering_key"] = options["key"]
    if options.get("coalesce"):
        if options.get("key") is None:
            raise ConfigError(
                "coalesce needs an ordering key (key= or the class's ordering_key): "
                "only waiting jobs of one key are merged"
            )
        payload["coalesce"] = options["coalesce"]
    if options.get("score") is not None:
        payload["score"] = options["score"]
    if options.get("tenant") is not None:
        payload["tenant"] = options["tenant"]
    if options.get("concurrency_key") is not None:
        payload["concurrency_key"] = options["concurrency_key"]
        payload["concurrency_limit"] = options["concurrency_limit"]
    if options.get("priority"):  # 0, the default, is a plain job: no field
        check_priority(options)
        payload["priority"] = options["priority"]
    if options.get("expires_in") is not None:
        # Sidekiq Pro's expiring jobs: counted from the run time, so a scheduled job
        # has its whole window once due.
        payload["expires_at"] = max(now, at or now) + float(options["expires_in"])
    if options.get("unique_for") is not None:
        payload["unique_key"] = unique_digest(
            payload["class"], payload["queue"], payload["args"], options.get("unique_key")
        )
        payload["unique_until"] = max(now, at or now) + float(options["unique_for"])
