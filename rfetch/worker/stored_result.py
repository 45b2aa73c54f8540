"""Result storage (``store_result``): the server step that records a job's return value
with its acknowledgement (``complete.lua``, through :class:`RecordedUnit`)."""

from __future__ import annotations

from rfetch.store.workflow_commands import Ending
from rfetch.worker.job_run import JobRun
from rfetch.worker.outcome import RecordedUnit, recorded_ttl, result_text
from rfetch.worker.steps import Step


class StoredResult(Step):
    """After ``perform``: a ``store_result`` job is acknowledged with its record (the
    record and the acknowledgement in one script, deferred like any acknowledgement:
    pipelined just before the fetcher's next fetch)."""

    name = "result-storage"

    def after(self, run: JobRun) -> None:
        """Make the job's acknowledgement the one that writes its record.

        Raises:
            ResultNotSerializable: the return value is not native JSON (the execution
                fails).
        """
        ttl = recorded_ttl(run.unit)
        if ttl is None:
            return
        ending = Ending("succeeded", ttl, result=result_text(run.value))
        run.ack_as = RecordedUnit.of(run.unit, run.job["class"], ending)
