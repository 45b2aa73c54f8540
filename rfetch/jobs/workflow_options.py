"""The workflow options of a job, and their checks.

- ``store_result`` (seconds): the job's outcome is recorded when it is acknowledged or dies
  (``rfetch.result`` reads it), and jobs may wait on it (``after``).
- ``after`` (a jid, or a bid / ``rfetch.Batch``): the job waits, outside any queue, until
  that job (or batch) has succeeded (``after_outcome="success"``, the default) or finished
  either way (``"complete"``). A bid is told from a jid by its batch's hash existing.
- ``on_dependency_death``: what happens to the waiting job when its dependency dies:
  ``"dead"`` (the default: the dead set, ``error_class`` ``rfetch.DependencyFailed``) or
  ``"cancel"`` (dropped, counted).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rfetch.errors import ConfigError

WORKFLOW_FIELDS = ("store_result", "after", "after_outcome", "on_dependency_death")
"""The workflow options, written to the payload under their own names when set."""

AFTER_OUTCOMES = ("success", "complete")
"""``after_outcome`` values: run after the dependency's success, or after it finished."""

DEATH_ACTIONS = ("dead", "cancel")
"""``on_dependency_death`` values."""

MAX_STORE_RESULT = 90 * 24 * 3600
"""The longest a result is kept, seconds (90 days)."""

_JID = re.compile(r"^[0-9a-f]{24}$")

UNWAITABLE = ("key", "unique_for", "tenant", "coalesce", "concurrency_key")
"""Options a waiting job may not have: it is released by a Lua script that pushes it to its
queue directly, not through the ordering-key gate or a fetch cap."""


def after_as_id(options: Mapping[str, Any]) -> Mapping[str, Any]:
    """``options`` with an ``after`` given as a batch object (``rfetch.Batch``: anything
    with a string ``bid``) replaced by its bid."""
    bid = getattr(options.get("after"), "bid", None)
    return {**options, "after": bid} if isinstance(bid, str) else options


def check_workflow_options(options: Mapping[str, Any]) -> None:
    """Raise ConfigError for a bad ``store_result``, ``after``, ``after_outcome`` or
    ``on_dependency_death``."""
    ttl = options.get("store_result")
    if ttl is not None and (
        isinstance(ttl, bool) or not isinstance(ttl, int) or not 0 < ttl <= MAX_STORE_RESULT
    ):
        raise ConfigError(
            f"store_result must be a whole number of seconds in 1..{MAX_STORE_RESULT} "
            f"(how long the result is kept), got {ttl!r}"
        )
    after = options.get("after")
    if after is not None:
        if not isinstance(after, str) or not _JID.match(after):
            raise ConfigError(
                f"after must be a jid or a bid (24 lowercase hex characters) or an rfetch.Batch, "
                f"got {after!r}"
            )
        if options.get("jid") == after:
            raise ConfigError(f"a job cannot wait on itself (after= is its own jid {after})")
        clash = [name for name in UNWAITABLE if options.get(name)]
        if clash:
            raise ConfigError(
                f"a job with after= cannot have {clash}: a waiting job is released straight "
                "to its queue, not through the ordering-key gate or a fetch cap"
            )
    outcome = options.get("after_outcome")
    if outcome is not None and outcome not in AFTER_OUTCOMES:
        raise ConfigError(f"after_outcome must be one of {AFTER_OUTCOMES}, got {outcome!r}")
    death = options.get("on_dependency_death")
    if death is not None and death not in DEATH_ACTIONS:
        raise ConfigError(f"on_dependency_death must be one of {DEATH_ACTIONS}, got {death!r}")
