"""The invariants checked once the system is quiet, each returning its violations as
lines (empty: it holds). What ran is read from the jobs' evidence, where each job ended
from the dead set and the recorded results, never from rfetch's own counters."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import redis

from tests.model.harness import Evidence, held
from tests.model.model import (
    EXPIRY,
    GONE,
    SUCCEEDED,
    BatchSpec,
    JobSpec,
    allowed,
    expected_callbacks,
)


def dead_entries(r: redis.Redis) -> dict[str, list[str]]:
    """jid -> error classes of its dead-set entries."""
    found: dict[str, list[str]] = defaultdict(list)
    for raw in r.zrange("dead", 0, -1):
        job = json.loads(raw)
        found[str(job.get("jid"))].append(str(job.get("error_class")))
    return found


def observed(jid: str, dead: dict[str, list[str]], evidence: Evidence) -> str:
    """``dead:<class>`` (one dead entry), ``succeeded`` (perform returned), ``gone``, or
    ``several:...`` when it has more than one of these."""
    seen = [f"dead:{cls}" for cls in dead.get(jid, [])]
    if evidence.count(jid, "ok"):
        seen.append(SUCCEEDED)
    if len(seen) > 1:
        return "several:" + ",".join(seen)
    return seen[0] if seen else GONE


def dependency_succeeded(spec: JobSpec, outcomes: dict[str, str]) -> bool | None:
    if spec.after is None:
        return None
    return outcomes.get(spec.after) == SUCCEEDED


RECORD_LAG = 0.5
"""Seconds a start record may follow the worker's expiry check (the thread may be
descheduled in between on a loaded machine): a first start later than the expiry plus this
is a job run after its expiry."""


def note_in_time(specs: list[JobSpec], evidence: Evidence) -> None:
    """Mark the expiring jobs a worker started within their expiry."""
    for spec in specs:
        starts = evidence.events(str(spec.jid), "start")
        latest = spec.pushed_at + EXPIRY + RECORD_LAG
        spec.in_time = spec.expires and bool(starts) and starts[0].at <= latest


def check_outcomes(specs: list[JobSpec], r: redis.Redis, evidence: Evidence) -> list[str]:
    """Every accepted job ended in exactly one outcome the model allows."""
    dead = dead_entries(r)
    outcomes = {s.jid: observed(s.jid, dead, evidence) for s in specs if s.jid}
    errors = []
    for spec in specs:
        if spec.jid is None:
            continue
        ok = allowed(spec, dependency_succeeded(spec, outcomes))
        if outcomes[spec.jid] not in ok:
            seen = [(e.kind, e.pid, round(e.at, 3), e.extra)
                    for e in evidence.by_jid.get(spec.jid, [])]
            errors.append(f"{spec.jid}: ended {outcomes[spec.jid]}, the model allows {sorted(ok)}"
                          f" ({spec}; evidence {seen})")
    return errors


def check_starts(specs: list[JobSpec], evidence: Evidence) -> list[str]:
    """At least once, and more only after a KILL or TERM found the job (the duplicate
    bound); never a start after a cancel that answered ``deleted`` or ``marked``; never a
    start of an expired job or of one whose dependency failed."""
    errors = []
    dead = {s.jid: s for s in specs if s.jid}
    for spec in specs:
        if spec.jid is None:
            continue
        starts = evidence.events(spec.jid, "start")
        dep_failed = spec.after is not None and evidence.count(spec.after, "ok") == 0
        never = spec.never_runs() or (dep_failed and dead.get(spec.after) is not None)
        if never and starts:
            errors.append(f"{spec.jid}: started {len(starts)} time(s) but must never run ({spec})")
            continue
        if spec.cancel is not None and spec.cancel[0] in ("deleted", "marked"):
            late = [e for e in starts if e.at > spec.cancel[2]]
            if late:
                errors.append(f"{spec.jid}: started after its cancel answered {spec.cancel[0]}"
                              f" ({spec})")
        bound = spec.nominal_starts() + spec.exposures
        if len(starts) > bound:
            errors.append(f"{spec.jid}: started {len(starts)} times, bound {bound} ({spec})")
        if spec.cancel is None and not never and not starts:
            errors.append(f"{spec.jid}: never started ({spec})")
    return errors


def check_unique(specs: list[JobSpec], evidence: Evidence) -> list[str]:
    """A push refused for a unique lock had an earlier accepted job of the key; a job of
    the key never starts after a later job of the key was accepted (it held the lock)."""
    errors = []
    by_key: dict[str, list[JobSpec]] = defaultdict(list)
    for spec in specs:
        if spec.unique is None:
            continue
        earlier = [s for s in by_key[spec.unique] if s.jid]
        if spec.jid is None and not earlier:
            errors.append(f"push of unique key {spec.unique} refused with no job of the key")
        if spec.jid is not None:
            for old in earlier:
                late = [e for e in evidence.events(str(old.jid), "start") if e.at > spec.pushed_at]
                if late:
                    errors.append(f"{spec.jid} accepted while {old.jid} of unique key "
                                  f"{spec.unique} still held it (it started after)")
        by_key[spec.unique].append(spec)
    return errors


def check_order(specs: list[JobSpec], evidence: Evidence) -> list[str]:
    """The jobs of an ordering key first start in push order."""
    errors = []
    by_key: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for spec in specs:
        if spec.key is None or spec.jid is None:
            continue
        starts = evidence.events(spec.jid, "start")
        if starts:
            by_key[spec.key].append((starts[0].at, spec.jid))
    for key, firsts in by_key.items():
        if firsts != sorted(firsts):
            errors.append(f"ordering key {key}: first starts out of push order {firsts}")
    return errors


def runs(evidence: Evidence, jid: str, signalled: set[int]) -> list[tuple[float, float]]:
    """``(start, end)`` of each run of ``jid`` that ended in a process never signalled
    (a run cut by a KILL or TERM has no known end)."""
    found = []
    open_at: dict[int, float] = {}
    for event in evidence.by_jid.get(jid, []):
        if event.kind == "start":
            open_at[event.pid] = event.at
        elif event.kind in ("ok", "fail", "stopped", "overlimit") and event.pid in open_at:
            start = open_at.pop(event.pid)
            if event.pid not in signalled:
                found.append((start, event.at))
    return found


def check_overlap(specs: list[JobSpec], evidence: Evidence, signalled: set[int]) -> list[str]:
    """Never more runs of a concurrency key at once than its limit, nor two of an
    ordering key (from the runs' own start and end times)."""
    groups: dict[str, tuple[int, list[tuple[float, float]]]] = {}
    for spec in specs:
        if spec.jid is None:
            continue
        for name, limit in ((f"cap {spec.cap}", spec.cap_limit), (f"key {spec.key}", 1)):
            if name.endswith("None"):
                continue
            groups.setdefault(name, (limit, []))[1].extend(runs(evidence, spec.jid, signalled))
    errors = []
    for name, (limit, intervals) in groups.items():
        edges = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
        level = peak = 0
        for _, step in edges:
            level += step
            peak = max(peak, level)
        if peak > limit:
            errors.append(f"{name}: {peak} runs at once, limit {limit}: {sorted(intervals)}")
    return errors


def check_batches(specs: list[JobSpec], batches: list[BatchSpec], evidence: Evidence,
                  exposures: Counter[str]) -> list[str]:
    """Each batch pushed exactly the callbacks the model says, once each (one jid per
    event); each ran once, or more only after a KILL or TERM found it running."""
    errors = []
    for batch in batches:
        members = [s for s in specs if s.bid == batch.bid]
        succeeded = [evidence.count(jid, "ok") > 0 for jid in batch.jids]
        want = expected_callbacks(succeeded)
        got = evidence.callbacks(batch.bid)
        pushed = {event: len(set(jids)) for event, jids in got.items()}
        reruns = {event: jids for event, jids in got.items()
                  if len(jids) > 1 + exposures[jids[0]]}
        if pushed != want or reruns:
            errors.append(f"batch {batch.bid} (jobs {batch.jids}, succeeded {succeeded}): "
                          f"callbacks {got}, the model says {want} ({members})")
    return errors


def check_records(specs: list[JobSpec], r: redis.Redis, evidence: Evidence) -> list[str]:
    """A ``store_result`` job has a record, ``succeeded`` exactly when it succeeded."""
    errors = []
    for spec in specs:
        if not spec.store_result or spec.jid is None:
            continue
        status = r.hget(f"rfetch:result:{spec.jid}", "status")
        if status is None:
            errors.append(f"{spec.jid}: store_result job without a record ({spec})")
            continue
        ok = evidence.count(spec.jid, "ok") > 0
        if (status == b"succeeded") != ok:
            cls = r.hget(f"rfetch:result:{spec.jid}", "error_class")
            errors.append(f"{spec.jid}: record {status!r} {cls!r}, perform returned: {ok}")
    return errors


def check_all(specs: list[JobSpec], batches: list[BatchSpec], r: redis.Redis,
              evidence: Evidence, signalled: set[int], exposures: Counter[str]) -> list[str]:
    """Every invariant; the violations, one per line."""
    left = held(r)
    note_in_time(specs, evidence)
    return [
        *check_outcomes(specs, r, evidence),
        *check_starts(specs, evidence),
        *check_unique(specs, evidence),
        *check_order(specs, evidence),
        *check_overlap(specs, evidence, signalled),
        *check_batches(specs, batches, evidence, exposures),
        *check_records(specs, r, evidence),
        *(f"left held: {key} = {value}" for key, value in left.items()),
    ]
