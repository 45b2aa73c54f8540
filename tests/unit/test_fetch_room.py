"""The fetch size of a worker with threads and an event loop (rfetch.worker.fetch_room):
thread room, loop room by the async share, the probes for async jobs while the threads are
full, and the bound ``concurrency + prefetch + async_concurrency``."""

from __future__ import annotations

import itertools

from rfetch.worker.fetch_room import PROBE_FIRST, PROBE_MAX, FetchRoom


def _room(slots: int = 100, all_async: bool = False) -> FetchRoom:
    """3 threads, prefetch 3."""
    return FetchRoom(3, 3, slots, all_async)


def test_a_worker_that_fetched_only_sync_jobs_asks_only_for_thread_room() -> None:
    room = _room()
    assert room.size(sync_room=6, async_room=100, total_room=106) == 6
    room.observed(6, 0)
    assert not room.expects_async
    assert room.size(sync_room=0, async_room=100, total_room=100) == 0


def test_async_jobs_open_the_loops_room_and_sync_jobs_close_it_again() -> None:
    room = _room()
    room.observed(4, 4)
    assert room.expects_async
    assert room.size(sync_room=0, async_room=100, total_room=100) > 0
    for _ in range(20):
        room.observed(6, 0)
    assert not room.expects_async
    assert room.size(sync_room=2, async_room=100, total_room=100) == 2


def test_a_mixed_fetch_expects_at_most_one_sync_job_beyond_the_threads_room() -> None:
    room = _room()
    room.share = 0.5
    wanted = room.size(sync_room=3, async_room=100, total_room=106)
    assert wanted == 8  # (3 + 1) / 0.5: about 4 sync and 4 async
    assert room.size(sync_room=3, async_room=2, total_room=106) == 4  # 2 / 0.5


def test_an_all_async_worker_fills_the_loop_and_never_exceeds_the_total() -> None:
    room = _room(all_async=True)
    assert room.size(sync_room=6, async_room=100, total_room=106) == 100
    assert room.size(sync_room=6, async_room=100, total_room=40) == 40
    room.observed(0, 0)
    assert room.share == 1.0


def test_the_plan_counts_the_loops_slots_only_while_async_jobs_come() -> None:
    room = _room()
    # 3 threads + 3 ahead; 2 sync jobs held: room for 4, capacity without the slots.
    plan = room.plan(threads=6, held=2, looped=0, waiting=0, loop_idle=True, now=0.0)
    assert (plan.room, plan.probe, plan.low_water) == (4, False, 6 - 1)
    room.observed(10, 10)
    plan = room.plan(threads=6, held=2, looped=0, waiting=0, loop_idle=True, now=0.0)
    assert plan.room > 4 and plan.low_water == 106 - 26


def test_full_threads_and_an_idle_loop_probe_for_async_jobs_with_a_back_off() -> None:
    """Defect: threads busy on long jobs, share 0: the loop's room never counted, so async
    jobs queued behind were never fetched."""
    room = _room(slots=6)
    # 3 threads busy with long jobs (no allowance), nothing waiting, the loop idle.
    def plan(now: float) -> tuple[int, bool]:
        got = room.plan(threads=3, held=3, looped=0, waiting=0, loop_idle=True, now=now)
        return got.room, got.probe

    assert plan(0.0) == (1, True)
    room.observed(1, 0)  # the probe brought a sync job (given back)
    assert plan(0.0) == (0, False)
    assert plan(PROBE_FIRST - 0.01) == (0, False)
    assert plan(PROBE_FIRST) == (1, True)  # then 2x, 4x ... up to PROBE_MAX apart
    sent = [PROBE_FIRST]
    now = PROBE_FIRST
    while now < 60.0:
        now += 0.05
        if plan(now)[1]:
            sent.append(now)
    gaps = [b - a for a, b in itertools.pairwise(sent)]
    assert gaps[0] >= 2 * PROBE_FIRST - 0.01
    assert max(gaps) <= PROBE_MAX + 0.06 and gaps[-1] >= PROBE_MAX - 0.01
    assert len(sent) <= 2 + 60.0 / PROBE_MAX  # no fetch/give-back loop


def test_a_probe_that_brings_an_async_job_opens_the_loops_room() -> None:
    room = _room(slots=6)
    assert room.plan(threads=3, held=3, looped=0, waiting=0, loop_idle=True, now=9.0).probe
    room.observed(1, 1)
    assert room.expects_async
    plan = room.plan(threads=3, held=4, looped=1, waiting=0, loop_idle=False, now=9.0)
    assert plan.room >= 1 and not plan.probe and plan.eager
    # The back-off starts again from PROBE_FIRST once the share falls back to 0.
    for _ in range(30):
        room.observed(1, 0)
    assert not room.expects_async
    assert room.plan(threads=3, held=3, looped=0, waiting=0, loop_idle=True,
                     now=9.0 + PROBE_FIRST).probe


def test_no_probe_when_the_loop_is_full_or_sync_jobs_fill_their_bound() -> None:
    room = _room(slots=6)
    # The loop's slots are all taken (the async jobs there are long).
    assert not room.plan(threads=3, held=9, looped=6, waiting=0, loop_idle=False,
                         now=0.0).probe
    # 3 running + 3 waiting sync jobs: concurrency + prefetch, a probed sync job would
    # exceed it.
    assert not room.plan(threads=3, held=6, looped=0, waiting=3, loop_idle=True,
                         now=0.0).probe
    # Room for the threads: a plain fetch, no probe.
    plan = room.plan(threads=6, held=3, looped=0, waiting=0, loop_idle=True, now=0.0)
    assert (plan.room, plan.probe) == (3, False)
    # A worker without a loop never probes.
    assert not FetchRoom(3, 3, 0, False).plan(threads=3, held=3, looped=0, waiting=0,
                                              loop_idle=True, now=0.0).probe


def test_async_jobs_waiting_for_a_slot_leave_the_threads_room_within_the_bound() -> None:
    """Defect: with the loop full and async jobs at the head of the queue, async jobs
    waiting for a slot took the threads' room once the allowance fell to 0 (long sync
    jobs before), so idle threads never reached the sync jobs behind them."""
    room = FetchRoom(2, 2, 6, False)  # -c 2, prefetch 2, --async-concurrency 6
    room.share = 0.9
    # Loop full (6 running), threads idle, no fetch-ahead allowance: room for 2.
    assert room.plan(threads=2, held=6, looped=6, waiting=0, loop_idle=False,
                     now=0.0).room == 2
    # Those 2 were async and wait for a slot: the threads still have room for 2.
    assert room.plan(threads=2, held=8, looped=8, waiting=0, loop_idle=False,
                     now=0.0).room == 2
    # The bound: concurrency + prefetch + async_concurrency = 10, never more.
    assert room.plan(threads=2, held=10, looped=10, waiting=0, loop_idle=False,
                     now=0.0).room == 0
    assert room.plan(threads=4, held=9, looped=9, waiting=0, loop_idle=False,
                     now=0.0).room == 1
