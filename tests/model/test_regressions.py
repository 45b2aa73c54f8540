"""Failing examples the model-based test found, kept as plain regression tests (the same
real workers and evidence as ``test_model.py``)."""

from __future__ import annotations

import json
import time

import rfetch
from tests.model.harness import System, wait_quiet
from tests.support.wait import wait_for


def test_a_batched_job_that_expires_before_it_starts_is_a_death_in_its_batch(
    system: System,
) -> None:
    """Found by the model: a batch whose only job expired fired ``success`` (the expiry
    acknowledged the job as a success), though the job never ran and a ``store_result``
    job's record says ``dead``, ``rfetch.JobExpired`` (a chord's body would run after a
    header that never ran). Shrunk: one batch, one job, ``expires_in`` 1 ms."""
    system.fleet.fill()
    jobs = system.jobs
    batch = rfetch.Batch(on_success=jobs.OnSuccess, on_complete=jobs.OnComplete,
                         on_death=jobs.OnDeath, client=system.client)
    queue = system.api.queue("default")
    queue.pause()  # no worker may start it within its millisecond
    try:
        with batch.jobs():
            jid = jobs.Scripted.set(client=system.client, expires_in=0.001).perform_async("ok")
        time.sleep(0.05)
    finally:
        queue.unpause()

    def fired() -> dict[str, int]:
        got = system.evidence.read().callbacks(batch.bid)
        return {event: len(jids) for event, jids in got.items()}

    wait_for(lambda: fired().get("complete"), 60, system.fleet.logs)
    wait_quiet(system)
    assert system.evidence.read().count(jid, "start") == 0
    assert fired() == {"complete": 1, "death": 1}
    failure = system.redis.hget(f"b-{batch.bid}-failinfo", jid)
    assert failure is not None and b"rfetch.JobExpired" in failure


def test_a_cancel_that_asks_for_the_dead_set_keeps_a_dead_false_job_there(
    system: System,
) -> None:
    """Found by the model: ``cancel(jid, dead=True)`` of a job pushed with ``dead=False``
    put it in the dead set when the API took it from its queue, but dropped it when a
    worker recorded the cancel (the job waited in its tenant's list, so the cancel answered
    ``marked``): the payload's ``"dead": false`` won over the request. Shrunk: one tenant
    job, ``dead=False``, cancelled at once with ``dead=True``.

    Pushed and cancelled while no worker runs, then the workers start: a worker idle on a
    queue not yet known to be fair looks for its first tenant job only every 30 s
    (``FAIR_REFRESH_IDLE``), one that starts looks at once."""
    system.fleet.stop_all()
    scripted = system.jobs.Scripted.set(client=system.client, dead=False, tenant="t1")
    jid = scripted.perform_async("slow", 1.5)
    result = system.api.cancel(jid, dead=True, reason="regression")
    assert result.state in ("marked", "cancelling"), result.text  # a worker records it
    system.fleet.fill()
    wait_quiet(system)
    dead = {json.loads(raw)["jid"]: json.loads(raw) for raw in system.redis.zrange("dead", 0, -1)}
    assert jid in dead, "dropped instead of kept in the dead set"
    assert dead[jid]["error_class"] == "rfetch.JobCancelled"
    assert system.evidence.read().count(jid, "ok") == 0
