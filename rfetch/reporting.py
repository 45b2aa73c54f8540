"""Calling the configured error handlers safely."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from rfetch.config import ErrorHandler

log = logging.getLogger("rfetch.errors")


def report(handlers: Sequence[ErrorHandler], exc: BaseException, context: dict[str, Any]) -> None:
    """Call every handler with ``(exc, context)``; a handler that raises is logged and the
    others still run (a broken handler must never stop a worker or lose a job)."""
    for handler in handlers:
        try:
            handler(exc, context)
        except Exception as handler_exc:
            log.error("error handler %r raised %r", handler, handler_exc)
