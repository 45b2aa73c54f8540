"""The fetch size of a worker with threads and an event loop (rfetch.worker.fetch_room)."""

from __future__ import annotations

from rfetch.worker.fetch_room import FetchRoom


def test_a_worker_that_fetched_only_sync_jobs_asks_only_for_thread_room() -> None:
    room = FetchRoom(100, all_async=False)
    assert room.size(sync_room=6, async_room=100, total_room=106) == 6
    room.observed(6, 0)
    assert not room.expects_async
    assert room.size(sync_room=0, async_room=100, total_room=100) == 0


def test_async_jobs_open_the_loops_room_and_sync_jobs_close_it_again() -> None:
    room = FetchRoom(100, all_async=False)
    room.observed(4, 4)
    assert room.expects_async
    assert room.size(sync_room=0, async_room=100, total_room=100) > 0
    for _ in range(20):
        room.observed(6, 0)
    assert not room.expects_async
    assert room.size(sync_room=2, async_room=100, total_room=100) == 2


def test_a_mixed_fetch_expects_at_most_one_sync_job_beyond_the_threads_room() -> None:
    room = FetchRoom(100, all_async=False)
    room.share = 0.5
    wanted = room.size(sync_room=3, async_room=100, total_room=106)
    assert wanted == 8  # (3 + 1) / 0.5: about 4 sync and 4 async
    assert room.size(sync_room=3, async_room=2, total_room=106) == 4  # 2 / 0.5


def test_an_all_async_worker_fills_the_loop_and_never_exceeds_the_total() -> None:
    room = FetchRoom(100, all_async=True)
    assert room.size(sync_room=6, async_room=100, total_room=106) == 100
    assert room.size(sync_room=6, async_room=100, total_room=40) == 40
    room.observed(0, 0)
    assert room.share == 1.0


def test_the_plan_counts_the_loops_slots_only_while_async_jobs_come() -> None:
    room = FetchRoom(100, all_async=False)
    # 3 threads + 3 ahead; 2 sync jobs held: room for 4, capacity without the slots.
    assert room.plan(threads=6, held=2, looped=0) == (4, 6)
    room.observed(10, 10)
    fetched, capacity = room.plan(threads=6, held=2, looped=0)
    assert capacity == 106 and fetched > 4
