"""The state machine of the model-based test: rules push jobs (alone, in a batch, or after
another) with random option combinations and scripted behaviours, and fire events (cancel,
TERM or KILL of a worker, time passing) against real workers; at the end of each example
the system is drained and every invariant of :mod:`tests.model.checks` is checked."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

import rfetch
from tests.model.checks import check_all
from tests.model.harness import System, wait_quiet
from tests.model.model import EXPIRY, BatchSpec, JobSpec

SLOW_SECONDS = 1.5
"""How long a ``slow`` job works: long enough to be cancelled or TERMed while running."""

CAP_LIMITS = {"c1": 1, "c2": 2}
"""Each concurrency key's limit (fixed: the latest push sets a key's limit)."""

BEHAVIOURS = st.sampled_from(["ok", "ok", "flaky", "fail", "slow", "overlimit"])
ROUTES = st.sampled_from(["plain", "plain", "key", "tenant", "key+tenant", "cap"])


@st.composite
def job_specs(draw: Any, unique: bool = True, routed: bool = True) -> JobSpec:
    """A behaviour and an option combination (jid and times filled in by the push)."""
    route = draw(ROUTES) if routed else "plain"
    spec = JobSpec(
        jid=None,
        behaviour=draw(BEHAVIOURS),
        retry=draw(st.integers(0, 2)),
        dead=draw(st.sampled_from([True, True, False])),
        store_result=draw(st.booleans()),
        expires=draw(st.sampled_from([False, False, False, True])),
    )
    if "key" in route:
        spec.key = draw(st.sampled_from(["k1", "k2"]))
    if "tenant" in route:
        spec.tenant = draw(st.sampled_from(["t1", "t2"]))
    if route == "cap":
        spec.cap = draw(st.sampled_from(["c1", "c2"]))
        spec.cap_limit = CAP_LIMITS[spec.cap]
    if unique and draw(st.integers(0, 3)) == 0:
        spec.unique = draw(st.sampled_from(["u1", "u2"]))
    return spec


def push_options(spec: JobSpec) -> dict[str, Any]:
    """The ``Job.set`` options of ``spec``."""
    options: dict[str, Any] = {"retry": spec.retry}
    if not spec.dead:
        options["dead"] = False
    if spec.store_result:
        options["store_result"] = 600
    if spec.key:
        options["key"] = spec.key
    if spec.tenant:
        options["tenant"] = spec.tenant
    if spec.cap:
        options["concurrency_key"] = spec.cap
        options["concurrency_limit"] = spec.cap_limit
    if spec.unique:
        options["unique_for"] = 600
        options["unique_key"] = spec.unique
    if spec.expires:
        options["expires_in"] = EXPIRY
    if spec.after:
        options["after"] = spec.after
    return options


class RfetchMachine(RuleBasedStateMachine):
    """One example: a few pushes and events on the shared :class:`System`."""

    def __init__(self, system: System, tally: Counter[str]) -> None:
        super().__init__()
        self.system = system
        self.tally = tally
        self.specs: list[JobSpec] = []
        self.batches: list[BatchSpec] = []
        self.exposures: Counter[str] = Counter()
        system.fleet.fill()
        tally["examples"] += 1

    def _push(self, spec: JobSpec) -> None:
        scripted = self.system.jobs.Scripted
        options = push_options(spec)
        spec.jid = scripted.set(client=self.system.client, **options).perform_async(
            spec.behaviour, SLOW_SECONDS)
        spec.pushed_at = time.time()
        self.specs.append(spec)
        self.tally["jobs"] += 1
        self.tally[f"behaviour:{spec.behaviour}"] += 1

    @rule(spec=job_specs())
    def push(self, spec: JobSpec) -> None:
        self.tally["steps"] += 1
        self._push(spec)

    @rule(members=st.lists(job_specs(unique=False), min_size=1, max_size=3))
    def push_batch(self, members: list[JobSpec]) -> None:
        self.tally["steps"] += 1
        jobs = self.system.jobs
        batch = rfetch.Batch(on_success=jobs.OnSuccess, on_complete=jobs.OnComplete,
                             on_death=jobs.OnDeath, client=self.system.client)
        with batch.jobs():
            for spec in members:
                self._push(spec)
        for spec in members:
            spec.bid = batch.bid
        self.batches.append(BatchSpec(batch.bid, [str(s.jid) for s in members]))
        self.tally["batches"] += 1

    @precondition(lambda self: any(s.store_result and s.unique is None for s in self.specs))
    @rule(spec=job_specs(unique=False, routed=False), index=st.integers(0, 100))
    def push_after(self, spec: JobSpec, index: int) -> None:
        self.tally["steps"] += 1
        targets = [s for s in self.specs if s.store_result and s.unique is None]
        spec.after = targets[index % len(targets)].jid
        spec.dead = True
        self._push(spec)

    def _cancel(self, spec: JobSpec, dead: bool) -> None:
        result = self.system.api.cancel(str(spec.jid), dead=dead, reason="model")
        answered = time.time()  # a start during the call may precede the cancel's effect
        if spec.cancel is None or spec.cancel[0] in ("dead", "not_found"):
            spec.cancel = (result.state, dead, answered)
        elif result.cancelled:
            spec.also_dead.add(dead)
        self.tally[f"cancel:{result.state}"] += 1

    @precondition(lambda self: bool(self.specs))
    @rule(index=st.integers(0, 100), dead=st.booleans())
    def cancel(self, index: int, dead: bool) -> None:
        self.tally["steps"] += 1
        spec = self.specs[index % len(self.specs)]
        if spec.jid is not None:  # not refused by its unique lock
            self._cancel(spec, dead)

    @precondition(lambda self: any(s.behaviour == "slow" for s in self.specs))
    @rule(dead=st.booleans())
    def cancel_running(self, dead: bool) -> None:
        """Cancel a slow job once it runs (if one starts within 3 s)."""
        self.tally["steps"] += 1
        evidence = self.system.evidence
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            evidence.read()
            running = [s for s in self.specs if s.behaviour == "slow" and s.jid
                       and evidence.by_jid.get(s.jid, [])[-1:]
                       and evidence.by_jid[s.jid][-1].kind == "start"]
            if running:
                self._cancel(running[0], dead)
                return
            time.sleep(0.05)

    def _signal(self, how: str, index: int) -> None:
        """TERM or KILL a worker; every job running or just finished then is exposed."""
        self.tally["steps"] += 1
        self.tally[how] += 1
        exposed = self.system.evidence.read().recent(time.time())
        if how == "TERM":
            self.system.fleet.term(index)
        else:
            self.system.fleet.kill(index)
        exposed |= self.system.evidence.read().recent(time.time())
        self.exposures.update(exposed)

    @rule(index=st.integers(0, 1))
    def term_worker(self, index: int) -> None:
        self._signal("TERM", index)

    @rule(index=st.integers(0, 1))
    def kill_worker(self, index: int) -> None:
        self._signal("KILL", index)

    @rule(seconds=st.sampled_from([0.2, 1.0]))
    def let_time_pass(self, seconds: float) -> None:
        self.tally["steps"] += 1
        time.sleep(seconds)

    def teardown(self) -> None:
        self.system.fleet.fill()
        wait_quiet(self.system)
        evidence = self.system.evidence.read()
        for spec in self.specs:
            spec.exposures = self.exposures[str(spec.jid)]
        violations = check_all(self.specs, self.batches, self.system.redis, evidence,
                               self.system.fleet.signalled, self.exposures)
        assert not violations, "\n".join(violations)
