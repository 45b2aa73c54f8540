"""Which threads run the held jobs (worker/handoff.py's backlog, worker/runners.py's limit):
the thread that ends a job takes the next one itself, sleeping threads are woken only up to
the runner limit, and never left asleep while every awake thread runs an old job."""

from __future__ import annotations

from typing import Any, cast

from rfetch.worker.handoff import HandOff
from rfetch.worker.runners import GROW_BELOW, SHRINK_AT, WINDOW, RunnerLimit
from rfetch.worker.unit import UnitOfWork

SPILL = 0.005


def units(count: int) -> list[UnitOfWork]:
    fetch = cast("Any", None)  # never used: no Redis in these tests
    return [UnitOfWork("default", b"{}", "private", None, fetch) for _ in range(count)]


def queued(pool: HandOff) -> int:
    count = 0
    while not pool.queue.empty():
        pool.queue.get_nowait()
        count += 1
    return count


def held(pool: HandOff, jobs: list[UnitOfWork]) -> None:
    for unit in jobs:
        pool.held[id(unit)] = (unit, 0.0)


def test_a_batch_of_short_jobs_wakes_one_thread_under_a_limit_of_one() -> None:
    pool = HandOff(10, SPILL)
    jobs = units(8)
    held(pool, jobs)
    pool.offer(jobs, 1, now=100.0)
    assert queued(pool) == 1, "one thread woken, handed the first job"
    assert pool.awake == 1
    assert list(pool.backlog) == jobs[1:]


def test_the_limit_at_concurrency_wakes_a_thread_per_job_as_before() -> None:
    pool = HandOff(10, SPILL)
    jobs = units(4)
    held(pool, jobs)
    pool.offer(jobs, 10, now=100.0)
    assert queued(pool) == 4
    assert pool.awake == 4 and not pool.backlog


def test_the_thread_that_ends_a_job_takes_the_next_then_sleeps_when_none_is_left() -> None:
    pool = HandOff(10, SPILL)
    jobs = units(3)
    held(pool, jobs)
    pool.offer(jobs, 1, now=100.0)
    queued(pool)
    assert pool.next_job(1, now=100.001) is jobs[1]
    assert pool.next_job(1, now=100.002) is jobs[2]
    assert pool.next_job(1, now=100.003) is None
    assert pool.awake == 0, "back to sleep on the queue"


def test_a_thread_over_the_limit_goes_back_to_sleep_leaving_the_backlog_to_others() -> None:
    pool = HandOff(10, SPILL)
    jobs = units(6)
    held(pool, jobs)
    pool.offer(jobs, 3, now=100.0)
    assert queued(pool) == 3
    # The limit dropped to 1 meanwhile: two of the three go back to sleep as they end.
    assert pool.next_job(1, now=100.001) is None
    assert pool.next_job(1, now=100.001) is None
    assert pool.next_job(1, now=100.001) is jobs[3]
    assert pool.awake == 1


def test_a_job_waiting_behind_a_long_one_gets_a_sleeping_thread() -> None:
    pool = HandOff(10, SPILL)
    jobs = units(2)
    held(pool, jobs)
    pool.offer(jobs, 1, now=100.0)
    assert queued(pool) == 1
    pool.started[1] = 100.0  # the awake thread started the first job
    pool.wake(1, now=100.0 + SPILL / 2)
    assert queued(pool) == 0, "its job is young: it takes the next one soon"
    assert pool.next_check(100.0 + SPILL / 2, 0.05) <= SPILL / 2 + 1e-9
    pool.wake(1, now=100.0 + SPILL * 1.1)
    assert queued(pool) == 1, "its job is old: a sleeping thread takes the waiting one"
    assert pool.awake == 2 and not pool.backlog


def test_the_fetcher_checks_at_its_own_pace_when_nothing_waits() -> None:
    pool = HandOff(10, SPILL)
    assert pool.next_check(100.0, 0.05) == 0.05


def test_everyone_wakes_a_thread_per_waiting_job() -> None:
    pool = HandOff(3, SPILL)
    jobs = units(5)
    held(pool, jobs)
    pool.offer(jobs, 1, now=100.0)
    pool.wake(1, now=100.0, everyone=True)
    assert queued(pool) == 3, "as many as there are threads"
    assert len(pool.backlog) == 2


def test_taking_waiting_jobs_back_empties_the_backlog_and_the_queue() -> None:
    pool = HandOff(10, SPILL)
    jobs = units(5)
    held(pool, jobs)
    pool.offer(jobs, 2, now=100.0)
    taken = pool.take_waiting(lambda unit: True, quiet=True)
    assert sorted(map(id, taken)) == sorted(map(id, jobs))
    assert not pool.backlog and not pool.held and pool.awake == 0


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.cpu = 0.0

    def run(self, seconds: float, share: float) -> None:
        self.now += seconds
        self.cpu += seconds * share


def test_the_limit_drops_while_the_gil_is_saturated_and_grows_while_threads_wait() -> None:
    clock = Clock()
    limit = RunnerLimit(4, clock=lambda: clock.now, cpu=lambda: clock.cpu)
    assert limit.limit == 4, "as before until measured"
    for expected in (3, 2, 1, 1):
        clock.run(WINDOW * 1.01, SHRINK_AT)
        assert limit.sample(waiting=True) == expected
    clock.run(WINDOW * 1.01, GROW_BELOW / 2)
    assert limit.sample(waiting=True) == 2
    clock.run(WINDOW * 1.01, SHRINK_AT)
    assert limit.sample(waiting=False) == 2, "nothing waits: the limit binds nothing"
    clock.run(WINDOW / 2, 0.0)
    assert limit.sample(waiting=True) == 2, "not a whole window yet"
