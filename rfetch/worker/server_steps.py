"""The one place the worker's server steps are listed, in their order around ``perform``.

1. ``expiry``: a job past its ``expires_at`` ends ``"expired"`` before anything of it
   runs (Sidekiq Pro's ``expires_in``).
2. ``cancel-before-start``: a job with a cancel mark ends ``"cancelled"``.
3. ``coalesce``: a coalescing holder takes its key's waiting jobs (after the two checks
   above, so an expired or cancelled holder takes none); they end with it.
4. ``batch-context``, 5. ``progress``: what the instance sees.
6. ``result-storage``: a ``store_result`` job's return value recorded with its ack.
7. ``over-limit``: an :class:`rfetch.OverLimit` failure ends ``"rescheduled"``.
8. ``durable``: a durable job's hold, and its ends ``"interrupted"`` / ``"refused"``.
9. ``server-middleware``: the user's chain, innermost, right around ``perform``.
"""

from __future__ import annotations

from collections.abc import Callable

from rfetch.worker.cancels import CancelCheck, CancelMarks
from rfetch.worker.coalesce import Coalesce
from rfetch.worker.context import WorkerContext
from rfetch.worker.durable_end import Durable
from rfetch.worker.expiry import Expiry
from rfetch.worker.job_setup import BatchContext, Progress
from rfetch.worker.middleware_step import ServerChain
from rfetch.worker.overlimit import OverLimitStep
from rfetch.worker.retry import JobRetry
from rfetch.worker.steps import Steps
from rfetch.worker.stored_result import StoredResult
from rfetch.worker.unit import UnitOfWork
from rfetch.workflow.progress import ProgressWriter


def server_steps(
    context: WorkerContext,
    job_retry: JobRetry,
    ack: Callable[[UnitOfWork], object],
    marks: CancelMarks,
) -> Steps:
    """The worker's steps, in order (see the module's docstring).

    Args:
        context: the worker context.
        job_retry: writes cancels, reschedules and invalid followers.
        ack: the processor's acknowledgement (an expired job's).
        marks: the pending cancel marks.
    """
    return Steps([
        Expiry(context, ack),
        CancelCheck(marks, job_retry, context.stats, context.report),
        Coalesce(job_retry),
        BatchContext(),
        Progress(ProgressWriter(context.redis, context.keys)),
        StoredResult(),
        OverLimitStep(job_retry, context.stats),
        Durable(),
        ServerChain(context.config),
    ])
