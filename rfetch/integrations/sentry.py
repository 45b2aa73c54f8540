"""Report job failures and internal errors to Sentry, through ``Config.error_handlers``.

Nothing here imports ``sentry_sdk`` at module level: the module imports cleanly without the
``sentry`` extra, and :func:`install` reads ``SENTRY_DSN`` only when it is called (never at
import, STYLE.md).

Each call of the error handler sends exactly one event, in a scope of its own
(``sentry_sdk.new_scope``, sentry-sdk 2.x), so the tags of one job never leak into the
next event of the same thread. What is sent is listed in docs/integrations.md.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rfetch.config import Config
from rfetch.errors import ConfigError

if TYPE_CHECKING:
    from sentry_sdk.client import BaseClient

log = logging.getLogger("rfetch.integrations.sentry")

INSTALL_HINT = "pip install 'rfetch[sentry]'"

CONTEXT_NAME = "rfetch"
"""Name of the Sentry context (the event's "Contexts" section) that holds the job."""

DUPLICATE_LOGGERS = ("rfetch.manager", "rfetch.retry")
"""rfetch loggers whose error records repeat what the error handler already reports (the
manager logs each internal error with its traceback, the retry module each invalid job).
:func:`install` tells sentry-sdk's logging integration to ignore them, as sentry-sdk's own
RQ, Celery and arq integrations ignore their worker loggers; without it, sentry-sdk's
deduplication keeps the log record's event and drops the one that carries the context."""


class SentryErrorHandler:
    """An error handler (``Config.error_handlers``) that sends each error to Sentry once.

    Job failures (context holds ``job``, ``queue``, ``jid``) get the tags ``jid``,
    ``queue``, ``job_class`` and ``retry_count``, the transaction name ``rfetch/<class>``,
    and a ``rfetch`` context with ``jid``, ``class``, ``queue``, ``retry_count`` and
    ``args``. Internal errors and invalid jobs (context holds ``context``, e.g.
    ``"fetch"``, ``"processor"``, ``"invalid job"``) get the tag ``rfetch.context`` and the
    same ``rfetch`` context with what is known.

    ``retry_count`` is Sidekiq's count as it stands after this failure: 0 when the first
    run fails, 1 when the first retry fails, and so on (Sidekiq's error handlers see the
    job after ``attempt_retry``; rfetch's processor calls handlers just before
    ``JobRetry.fail`` writes the new count, so it is computed here from the old one).

    Does nothing when sentry-sdk is not initialised; raises ImportError when it is not
    installed (rfetch logs a raising handler and goes on).

    Args:
        include_args: send the job's ``args`` (default True); pass False when arguments
            may hold personal data that must not leave your systems.
    """

    def __init__(self, include_args: bool = True) -> None:
        self.include_args = include_args

    def __repr__(self) -> str:
        return f"SentryErrorHandler(include_args={self.include_args})"

    def __call__(self, exc: BaseException, context: dict[str, Any]) -> None:
        import sentry_sdk

        details: dict[str, Any] = {}
        tags: dict[str, str] = {}
        transaction: str | None = None
        job = context.get("job")
        if isinstance(job, Mapping):
            jid = job.get("jid", context.get("jid"))
            job_class = job.get("class")
            retry_count = _retry_count_after_failure(job.get("retry_count"))
            details["jid"] = jid
            details["class"] = job_class
            details["retry_count"] = retry_count
            if self.include_args:
                details["args"] = job.get("args")
            tags.update(jid=str(jid), job_class=str(job_class), retry_count=str(retry_count))
            transaction = f"rfetch/{job_class}"
        elif context.get("jid") is not None:
            details["jid"] = context["jid"]
            tags["jid"] = str(context["jid"])
        queue = context.get("queue")
        if queue is not None:
            details["queue"] = queue
            tags["queue"] = str(queue)
        internal = context.get("context")
        if internal is not None:
            details["context"] = internal
            tags["rfetch.context"] = str(internal)
            if transaction is None:
                transaction = f"rfetch/{internal}"

        with sentry_sdk.new_scope() as scope:
            for key, value in tags.items():
                scope.set_tag(key, value)
            scope.set_context(CONTEXT_NAME, details)
            if transaction is not None:
                scope.set_transaction_name(transaction)
            sentry_sdk.capture_exception(exc)


def _retry_count_after_failure(previous: Any) -> int:
    if isinstance(previous, int) and not isinstance(previous, bool):
        return previous + 1
    return 0


def _sending(client: BaseClient) -> bool:
    """Whether sentry-sdk has a client that can send (``init`` without a DSN makes an
    active client with no transport)."""
    return client.is_active() and client.transport is not None


def install(config: Config, dsn: str | None = None, **sentry_options: Any) -> bool:
    """Report ``config``'s job failures and internal errors to Sentry.

    When sentry-sdk already has a working client (the application called
    ``sentry_sdk.init``), that client is kept and ``dsn`` / ``sentry_options`` are not
    used. Otherwise, with a DSN (``dsn``, else the ``SENTRY_DSN`` environment variable read
    now), ``sentry_sdk.init(dsn=dsn, **sentry_options)`` is called. Then a
    :class:`SentryErrorHandler` is appended to ``config.error_handlers`` (once, however
    often this is called) and rfetch's loggers in :data:`DUPLICATE_LOGGERS` are kept out of
    Sentry's logging integration, so each error is sent once.

    Args:
        config: the Config whose ``error_handlers`` get the handler (changed in place).
        dsn: the Sentry DSN; None or empty reads ``SENTRY_DSN``.
        sentry_options: passed to ``sentry_sdk.init`` (e.g. ``environment``, ``release``,
            ``transport``).

    Returns:
        True when errors will be sent to Sentry; False when no DSN is configured and
        sentry-sdk has no client (nothing is changed then).

    Raises:
        ConfigError: a DSN is configured but sentry-sdk is not installed, or the DSN is
            malformed.
    """
    dsn = dsn or os.environ.get("SENTRY_DSN") or None
    if dsn is None and "sentry_sdk" not in sys.modules:
        # Nothing to configure, and no application code has set up a client (that would
        # have imported sentry_sdk): skip the ~80 ms import at every worker start.
        return False
    try:
        import sentry_sdk
        from sentry_sdk.integrations.logging import ignore_logger
        from sentry_sdk.utils import BadDsn
    except ImportError:
        if dsn is None:
            return False
        raise ConfigError(
            f"a Sentry DSN is configured but sentry-sdk is not installed: {INSTALL_HINT}"
        ) from None

    if _sending(sentry_sdk.get_client()):
        if dsn is not None or sentry_options:
            log.info("sentry-sdk is already initialised; its client is kept as it is")
    elif dsn is None:
        return False
    else:
        try:
            sentry_sdk.init(dsn=dsn, **sentry_options)
        except BadDsn as exc:
            raise ConfigError(f"the Sentry DSN is not valid: {exc}") from None

    for name in DUPLICATE_LOGGERS:
        ignore_logger(name)
    if not any(isinstance(h, SentryErrorHandler) for h in config.error_handlers):
        config.error_handlers.append(SentryErrorHandler())
    return _sending(sentry_sdk.get_client())
