"""The worker's one error reporter: every part hands internal errors and job failures to it."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from rfetch.config import ErrorHandler

log = logging.getLogger("rfetch.errors")


class ErrorReporter:
    """Calls the configured error handlers (``Config.error_handlers``, as Sidekiq's
    ``error_handlers``) with ``(exception, context)``.

    Built once per worker process and given to every part that reports (processor, manager,
    poller, orphan recovery, launcher). Sidekiq's ``Component#handle_exception``.

    Args:
        handlers: the handlers, called in order.
    """

    def __init__(self, handlers: Sequence[ErrorHandler]) -> None:
        self.handlers = handlers

    def __call__(self, exc: BaseException, context: dict[str, Any]) -> None:
        """Report ``exc``; a handler that raises is logged and the others still run (a
        broken handler must never stop a worker or lose a job).

        Args:
            exc: what was raised.
            context: what was going on: ``{"context": "fetch"}``, or for a job ``{"job":
                payload, "queue": name, "jid": jid}``.
        """
        for handler in self.handlers:
            try:
                handler(exc, context)
            except Exception as handler_exc:
                log.error("error handler %r raised %r", handler, handler_exc)
