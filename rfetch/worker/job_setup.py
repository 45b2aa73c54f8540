"""The server steps that set what a job instance sees before it runs: its batch (a child
batch's parent) and its progress writer. No round trip."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rfetch.push.batch_context import enter_job
from rfetch.worker.job_run import JobRun
from rfetch.worker.steps import Step
from rfetch.workflow.progress import ProgressWriter

if TYPE_CHECKING:
    from rfetch.jobs.job import Job


class BatchContext(Step):
    """Batches: a batch created while the job runs is a child of the job's batch
    (``bid``), in the job's own context (an async job's: its task's)."""

    name = "batch-context"

    def begin(self, run: JobRun, instance: Job) -> None:
        """Enter the job's batch (none for a job outside a batch)."""
        bid = run.job.get("bid")
        enter_job(bid if isinstance(bid, str) and bid else None)


class Progress(Step):
    """Progress: a job's ``self.progress(percent, message)`` writes through ``writer``.

    Args:
        writer: where progress is written (one ``SET`` per call).
    """

    name = "progress"

    def __init__(self, writer: ProgressWriter) -> None:
        self.writer = writer

    def begin(self, run: JobRun, instance: Job) -> None:
        """Give the instance the writer."""
        instance.progress_writer = self.writer
