"""Sentry for rfetch (the ``sentry`` extra): errors with the job's context, a performance
transaction per job run continuing the producer's trace, Sentry Crons check-ins for periodic
jobs. What is sent is listed in docs/integrations.md.

- :class:`~rfetch.integrations.sentry.integration.RfetchIntegration` (also importable from
  here) is the sentry-sdk integration: ``sentry_sdk.init(integrations=[RfetchIntegration()])``;
- :func:`install` puts rfetch's parts into a Config: the client and server middleware of
  :mod:`rfetch.integrations.sentry.tracing` and :class:`SentryErrorHandler`;
- :mod:`rfetch.integrations.sentry.crons` builds the monitors and sends the check-ins.

Nothing here imports ``sentry_sdk`` at module level: the module imports cleanly without the
``sentry`` extra, and :func:`install` reads ``SENTRY_DSN`` only when it is called (never at
import, STYLE.md).

Each call of the error handler sends exactly one event, in a scope of its own
(``sentry_sdk.new_scope``, sentry-sdk 2.x), so the tags of one job never leak into the
next event of the same thread.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rfetch.config import Config
from rfetch.errors import ConfigError

if TYPE_CHECKING:
    from sentry_sdk.client import BaseClient

    from rfetch.integrations.sentry.integration import RfetchIntegration
    from rfetch.integrations.sentry.tracing import FailedRuns

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

    A job failure whose run the server middleware kept (``failed``) is sent in that run's
    isolation scope and trace: Sentry shows the error in the job's trace, with the job's
    breadcrumbs (its log lines) and no other job's.

    Does nothing when sentry-sdk is not initialised; raises ImportError when it is not
    installed (rfetch logs a raising handler and goes on).

    Args:
        include_args: send the job's ``args`` (default True); pass False when arguments
            may hold personal data that must not leave your systems.
        failed: the traces of failed runs the server middleware kept (None: none).
    """

    def __init__(self, include_args: bool = True, failed: FailedRuns | None = None) -> None:
        self.include_args = include_args
        self.failed = failed

    def __repr__(self) -> str:
        return f"SentryErrorHandler(include_args={self.include_args})"

    def __call__(self, exc: BaseException, context: dict[str, Any]) -> None:
        import sentry_sdk

        details, tags, transaction = self._describe(context)
        jid = details.get("jid")
        failed = self.failed if isinstance(jid, str) and "class" in details else None
        run = nullcontext() if failed is None else failed.scope_of(str(jid))  # a job's failure
        with run, sentry_sdk.new_scope() as scope:
            for key, value in tags.items():
                scope.set_tag(key, value)
            scope.set_context(CONTEXT_NAME, details)
            if transaction is not None:
                scope.set_transaction_name(transaction)
            sentry_sdk.capture_exception(exc)

    def _describe(
        self, context: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, str], str | None]:
        """The event's ``rfetch`` context, its tags and its transaction name."""
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
        return details, tags, transaction


def _retry_count_after_failure(previous: Any) -> int:
    if isinstance(previous, int) and not isinstance(previous, bool):
        return previous + 1
    return 0


def _sending(client: BaseClient) -> bool:
    """Whether sentry-sdk has a client that can send (``init`` without a DSN makes an
    active client with no transport)."""
    return client.is_active() and client.transport is not None


def __getattr__(name: str) -> Any:
    """``RfetchIntegration``, imported (with sentry-sdk) when first asked for."""
    if name == "RfetchIntegration":
        from rfetch.integrations.sentry.integration import RfetchIntegration

        return RfetchIntegration
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def install(
    config: Config,
    dsn: str | None = None,
    *,
    traces_sample_rate: float | None = None,
    crons: bool = True,
    integration: RfetchIntegration | None = None,
    **sentry_options: Any,
) -> bool:
    """Send ``config``'s job failures, internal errors, job runs (transactions) and periodic
    jobs' check-ins to Sentry, and carry the trace of each push in its payload.

    A working sentry-sdk client (the application called ``sentry_sdk.init``, best with
    ``integrations=[RfetchIntegration()]``) is kept, and the other arguments are not used.
    Otherwise, with a DSN, ``sentry_sdk.init(dsn=dsn, traces_sample_rate=...,
    integrations=[integration], **sentry_options)`` is called. Then, once however often
    this is called, :class:`~rfetch.integrations.sentry.tracing.SentryClientMiddleware`
    goes first in ``config.client_middleware``,
    :class:`~rfetch.integrations.sentry.tracing.SentryServerMiddleware` first in
    ``config.server_middleware`` and a :class:`SentryErrorHandler` last in
    ``config.error_handlers``.

    Args:
        config: the Config to change (in place): a worker's, or the producer's before
            ``rfetch.configure(config)``.
        dsn: the Sentry DSN; None or empty reads ``SENTRY_DSN`` (now).
        traces_sample_rate: the share of traces (0.0-1.0) sent as transactions; a run that
            continues a producer's trace follows the producer's decision. None (default):
            no transactions (sentry-sdk's default, tracing off).
        crons: Sentry Crons check-ins for periodic jobs (default True); the integration's
            ``monitor_periodic`` when ``integration`` is not given.
        integration: the :class:`RfetchIntegration` with its options (default:
            ``RfetchIntegration(monitor_periodic=crons)``).
        sentry_options: passed to ``sentry_sdk.init`` (``environment``, ``release``, ...).

    Returns:
        True when events will be sent to Sentry; False when no DSN is configured and
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
    sdk = _client(dsn, traces_sample_rate, crons, integration, sentry_options)
    if sdk is None:
        return False
    from rfetch.integrations.sentry.integration import RfetchIntegration

    RfetchIntegration.setup_once()  # also for a client initialised without the integration
    _add_parts(config)
    return _sending(sdk.get_client())


def _client(
    dsn: str | None,
    traces_sample_rate: float | None,
    crons: bool,
    integration: RfetchIntegration | None,
    sentry_options: dict[str, Any],
) -> Any:
    """The ``sentry_sdk`` module once a client is there (the application's, or one started
    here with ``dsn``); None when there is no DSN and no client.

    Raises:
        ConfigError: see :func:`install`.
    """
    try:
        import sentry_sdk
        from sentry_sdk.utils import BadDsn

        from rfetch.integrations.sentry.integration import RfetchIntegration
    except ImportError:
        if dsn is None:
            return None
        raise ConfigError(
            f"a Sentry DSN is configured but sentry-sdk is not installed: {INSTALL_HINT}"
        ) from None
    if _sending(sentry_sdk.get_client()):
        if dsn is not None or sentry_options or traces_sample_rate is not None:
            log.info("sentry-sdk is already initialised; its client is kept as it is")
        return sentry_sdk
    if dsn is None:
        return None
    try:
        sentry_sdk.init(
            dsn=dsn, traces_sample_rate=traces_sample_rate,
            integrations=[integration or RfetchIntegration(monitor_periodic=crons)],
            **sentry_options,
        )
    except BadDsn as exc:
        raise ConfigError(f"the Sentry DSN is not valid: {exc}") from None
    return sentry_sdk


@dataclass(frozen=True)
class SentrySettings:
    """What ``rfetch worker``'s ``--sentry-*`` options ask for.

    Attributes:
        dsn: ``--sentry-dsn`` (else ``SENTRY_DSN``, read by :func:`install`).
        traces_sample_rate: ``--sentry-traces-sample-rate``, 0.0-1.0 or None.
        crons: ``--sentry-crons/--no-sentry-crons``.
    """

    dsn: str | None = None
    traces_sample_rate: float | None = None
    crons: bool = True

    def install(self, config: Config) -> bool:
        """:func:`install` with these settings; its return value and errors."""
        return install(
            config, self.dsn, traces_sample_rate=self.traces_sample_rate, crons=self.crons
        )


def _add_parts(config: Config) -> None:
    """The middleware and the error handler, each once."""
    from rfetch.integrations.sentry.tracing import (
        FailedRuns,
        SentryClientMiddleware,
        SentryServerMiddleware,
    )

    failed = next(
        (m.failed for m in config.server_middleware if isinstance(m, SentryServerMiddleware)),
        None,
    )
    if failed is None:
        failed = FailedRuns()
        config.server_middleware.insert(0, SentryServerMiddleware(config.periodic, failed))
    if not any(isinstance(m, SentryClientMiddleware) for m in config.client_middleware):
        config.client_middleware.insert(0, SentryClientMiddleware())
    handlers = [h for h in config.error_handlers if isinstance(h, SentryErrorHandler)]
    if not handlers:
        config.error_handlers.append(SentryErrorHandler(failed=failed))
    for handler in handlers:  # the application's own (include_args=False): in the job's scope
        if handler.failed is None:
            handler.failed = failed
