"""Names of the job actions and the flash message summing up an action's result."""

from __future__ import annotations

from rfetch.api import ActionResult

ACTION_LABELS = {
    "retry": "Retry now",
    "add_to_queue": "Add to queue",
    "delete": "Delete",
    "kill": "Kill",
}
"""Button label of each action (the API's names)."""

ACTION_PAST = {
    "retry": "Retried",
    "add_to_queue": "Added to their queue",
    "delete": "Deleted",
    "kill": "Killed (moved to the dead set)",
}
"""What the flash message says was done."""


def outcome(result: ActionResult) -> tuple[str, str]:
    """Flash message and kind (``ok`` / ``warn``) for an action's result."""
    message = f"{ACTION_PAST.get(result.action, result.action)}: {result.done:,} job(s)."
    kind = "ok"
    if result.missing:
        message += f" {len(result.missing):,} already gone (moved by a worker or another admin)."
        kind = "warn"
    if result.skipped:
        message += f" {len(result.skipped):,} skipped (not valid jobs)."
        kind = "warn"
    if not result.complete:
        message += (f" Stopped after examining {result.scanned:,} entries; run it again for "
                    "the rest.")
        kind = "warn"
    return message, kind
