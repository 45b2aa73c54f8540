"""A :class:`~rfetch.worker.context.WorkerContext` around a fake Redis, for unit tests of
worker parts (no scripts are registered: the fake answers only what the part calls)."""

from __future__ import annotations

from typing import Any, cast

from rfetch.config import Config
from rfetch.observability.log_context import JobContext
from rfetch.observability.stats import Stats
from rfetch.store.keys import Keys
from rfetch.worker.context import WorkerContext
from rfetch.worker.reporting import ErrorReporter
from rfetch.worker.work_state import WorkState


def fake_context(
    redis: Any,
    work: WorkState | None = None,
    config: Config | None = None,
    report: ErrorReporter | None = None,
) -> WorkerContext:
    """A context on ``redis`` (a fake) with namespace-less keys and no commands."""
    keys = Keys()
    return WorkerContext(
        config or Config(), cast("Any", redis), keys, cast("Any", None),
        report or ErrorReporter([]), Stats(keys), "host:1:000000000000",
        work or WorkState(), JobContext(),
    )
