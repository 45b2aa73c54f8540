"""The plain-Python model of what must happen to each job, from docs/guarantees.md,
docs/workflows.md, docs/flow-control.md and docs/ordering.md.

A job's **natural outcome** follows from its behaviour and options alone:

- ``ok`` and ``slow`` succeed; ``flaky`` succeeds if it has a retry (``retry >= 1``);
  ``fail``, and ``flaky`` without a retry, die with ``RuntimeError``: the dead set, or
  discarded with ``dead=False`` (guarantees.md, "At least once");
- ``overlimit`` (``rfetch.OverLimit`` from a limiter that is always full, ``reschedule=1``)
  is rescheduled once without counting as a failure, then fails as usual, so dies with
  ``rfetch.OverLimit`` after ``retry + 2`` runs (flow-control.md, "Over the limit inside a
  job");
- a job pushed with a tiny ``expires_in`` (1 ms) is dropped as expired, not run
  (flow-control.md, "Expiring jobs"), unless a worker started it within that millisecond
  (it happens on an idle machine; its start record may lag the check, see
  ``tests.model.checks.RECORD_LAG``);
  then it runs once, and whatever would come back later (a retry, an over-limit
  reschedule, a push-back at TERM or a recovery) is dropped as expired ("A retry keeps its
  ``expires_at``");
- a job pushed ``after=`` another is buried with ``rfetch.DependencyFailed`` without
  running when that one did not succeed (workflows.md, "Dependencies").

A cancel changes it by what :func:`rfetch.api.cancel` answered: ``deleted`` and ``marked``
mean the job never starts after the cancel and ends cancelled (the dead set with
``rfetch.JobCancelled`` when asked, else dropped); ``cancelling`` (a worker holds it) allows
the cancel or the natural outcome (it may finish first); ``dead`` and ``not_found`` change
nothing. A job both expired and ``marked`` may end either way (it never runs): the worker
checks the expiry first.

A batch fires ``complete`` once (every job ended, at quiet), ``success`` once iff every
job succeeded, ``death`` once iff some job did not (workflows.md, "Batches").
"""

from __future__ import annotations

from dataclasses import dataclass, field

EXPIRY = 0.001
"""The tiny ``expires_in`` (seconds) of an expiring job."""

SUCCEEDED = "succeeded"
GONE = "gone"
"""Observed when a job neither succeeded nor is in the dead set: discarded, expired or
cancelled without the dead set."""


@dataclass
class JobSpec:
    """One pushed job and what the test did to it.

    Attributes:
        jid: its jid (None: the push returned None, a unique lock was held).
        behaviour: ``ok``, ``flaky``, ``fail`` or ``slow``.
        retry: the ``retry`` option (0, 1 or 2).
        dead: False when pushed with ``dead=False``.
        store_result: pushed with ``store_result``.
        key, tenant, cap, unique: the ordering key, tenant, concurrency key, unique key.
        expires: pushed with a tiny ``expires_in`` (:data:`EXPIRY`).
        in_time: an expiring job started within :data:`EXPIRY` (set by the checks).
        bid: its batch.
        after: the jid it waits on.
        pushed_at: epoch seconds when the push returned.
        cancel: what the first effective cancel answered, with ``dead`` and the epoch time
            of the answer.
        also_dead: the ``dead`` of later cancels that took effect too (each rewrites the
            mark, so the job ends as the last one the worker read asks).
        exposures: TERMs and KILLs that found it running or just finished.
    """

    jid: str | None
    behaviour: str
    retry: int = 1
    dead: bool = True
    store_result: bool = False
    key: str | None = None
    tenant: str | None = None
    cap: str | None = None
    cap_limit: int = 1
    unique: str | None = None
    expires: bool = False
    in_time: bool = False
    bid: str | None = None
    after: str | None = None
    pushed_at: float = 0.0
    cancel: tuple[str, bool, float] | None = None
    also_dead: set[bool] = field(default_factory=set)
    exposures: int = 0

    def never_runs(self) -> bool:
        """An expiring job that no worker started in time."""
        return self.expires and not self.in_time

    def fails_for_good(self) -> bool:
        return self.behaviour in ("fail", "overlimit") or (
            self.behaviour == "flaky" and self.retry == 0)

    def nominal_starts(self) -> int:
        """Starts without a kill, TERM or cancel: one per attempt."""
        if self.expires:
            return 1 if self.in_time else 0
        if self.behaviour == "fail":
            return self.retry + 1
        if self.behaviour == "overlimit":  # one reschedule, then a failure per attempt
            return self.retry + 2
        if self.behaviour == "flaky":
            return 2 if self.retry >= 1 else 1
        return 1


def natural(spec: JobSpec, dependency_succeeded: bool | None) -> str:
    """The natural outcome: ``succeeded``, ``dead:<class>`` or ``gone``.

    Args:
        spec: the job.
        dependency_succeeded: for an ``after=`` job, whether its dependency succeeded;
            None for other jobs.
    """
    if dependency_succeeded is False:
        return "dead:rfetch.DependencyFailed"
    if spec.never_runs():
        return GONE
    if spec.expires and spec.behaviour != "ok" and spec.behaviour != "slow":
        first_try_ends = spec.behaviour != "overlimit" and spec.retry == 0
        if not first_try_ends:  # comes back after its expiry: dropped then
            return GONE
    if spec.fails_for_good():
        if not spec.dead:
            return GONE
        if spec.behaviour == "overlimit":
            return "dead:rfetch.errors.OverLimit"
        return "dead:RuntimeError"
    return SUCCEEDED


POISON_RECOVERIES = 3
"""``poison_max_recoveries``: a job recovered that often is a poison pill (guarantees.md)."""


def allowed(spec: JobSpec, dependency_succeeded: bool | None) -> set[str]:
    """Every outcome the model allows for ``spec``, the cancel taken into account; a job
    exposed to :data:`POISON_RECOVERIES` KILLs or TERMs may also end as a poison pill."""
    found = _allowed(spec, dependency_succeeded)
    runs = spec.cancel is None and not spec.never_runs() and dependency_succeeded is not False
    if spec.exposures and spec.behaviour == "flaky" and runs:
        # Killed after its first failure and before the failure was recorded: recovered,
        # it runs again and succeeds (at least once), whatever its retry count.
        found.add(SUCCEEDED)
    if spec.exposures >= POISON_RECOVERIES:
        found.add("dead:rfetch.PoisonPill" if spec.dead else GONE)
    return found


def _allowed(spec: JobSpec, dependency_succeeded: bool | None) -> set[str]:
    nat = natural(spec, dependency_succeeded)
    if spec.in_time and spec.exposures:  # pushed back or recovered: then dropped as expired
        return {nat, GONE} if spec.cancel is None else {nat, GONE, *_cancelled(spec)}
    if spec.cancel is None:
        return {nat}
    state, dead, _ = spec.cancel
    if state == "deleted":  # the cancel itself took it out of its queue or set
        return {"dead:rfetch.JobCancelled" if dead else GONE}
    cancelled = _cancelled(spec)
    if state == "marked" and spec.expires:
        return {*cancelled, nat}  # the worker's expiry check comes before its cancel check
    if state == "marked":
        return cancelled
    if state == "cancelling":
        return {*cancelled, nat}
    if state == "not_found" and not dead:
        # A worker that read the mark as the lookup ran dropped the job: nothing is left
        # to tell that cancel from a job that finished (api/cancel.py, "not_found").
        return {nat, GONE}
    return {nat}


def _cancelled(spec: JobSpec) -> set[str]:
    """The outcomes of the cancels that took effect (each rewrote the mark)."""
    assert spec.cancel is not None
    return {"dead:rfetch.JobCancelled" if d else GONE for d in {spec.cancel[1], *spec.also_dead}}


@dataclass
class BatchSpec:
    """One batch pushed with all three callbacks; ``jids`` its jobs."""

    bid: str
    jids: list[str] = field(default_factory=list)


def expected_callbacks(succeeded: list[bool]) -> dict[str, int]:
    """The callbacks a batch fires once all its jobs ended, from whether each succeeded."""
    expected = {"complete": 1}
    if all(succeeded):
        expected["success"] = 1
    else:
        expected["death"] = 1
    return expected
