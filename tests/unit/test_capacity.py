"""Threads and event-loop slots counted apart and together: the work state's split, the
heartbeat's capsules, and a process read back from the hash of rfetch or of Sidekiq."""

from __future__ import annotations

import json

from rfetch.api.processes import _process
from rfetch.config import Config, QueueSpec
from rfetch.worker.capacity import Busy, Capacity
from rfetch.worker.work_state import WorkState


class Unit:
    queue = "default"


def test_work_state_counts_threads_and_loop_slots_apart() -> None:
    work = WorkState()
    work.begin(1, Unit())  # type: ignore[arg-type]
    work.begin(2, Unit(), looped=True)  # type: ignore[arg-type]
    work.begin(3, Unit(), looped=True)  # type: ignore[arg-type]
    assert work.occupancy() == Busy(threads=1, async_slots=2)
    work.end(2)
    work.abandon(1)
    running, busy = work.snapshot()
    assert list(running) == [3] and busy == Busy(0, 1) and busy.total == work.busy() == 1


def test_capsules_and_title_count_both_kinds() -> None:
    config = Config(queues=(QueueSpec("critical", 2), QueueSpec("default", 1)))
    capacity = Capacity(threads=5, async_slots=200)
    assert capacity.total == 205
    assert capacity.capsules(config) == {
        "default": {"concurrency": 5, "mode": "weighted", "weights": {"critical": 2, "default": 1}},
        "async": {"concurrency": 200, "mode": "weighted",
                  "weights": {"critical": 2, "default": 1}},
    }
    assert list(Capacity(5, 0).capsules(Config())) == ["default"]
    assert capacity.title(Busy(3, 140)) == "[143 of 205 busy]"


def test_a_process_of_rfetch_reads_back_split() -> None:
    info = {"concurrency": 205, "capsules": Capacity(5, 200).capsules(Config())}
    beat = {"info": json.dumps(info), "concurrency": "205", "busy": "143",
            "busy_threads": "3", "busy_async": "140"}
    process = _process("h:1:abc", beat, {})
    assert (process.concurrency, process.threads, process.async_slots) == (205, 5, 200)
    assert (process.busy, process.busy_threads, process.busy_async) == (143, 3, 140)


def test_a_sidekiq_process_is_all_threads() -> None:
    """Sidekiq 7 writes ``concurrency`` in ``info`` only; 8.1.2+ also as a hash field."""
    seven = _process("h:1:abc", {"info": json.dumps({"concurrency": 10}), "busy": "4"}, {})
    assert (seven.concurrency, seven.threads, seven.async_slots) == (10, 10, 0)
    assert (seven.busy_threads, seven.busy_async) == (4, 0)
    eight = _process("h:2:abc", {"info": json.dumps({"capsules": {
        "default": {"concurrency": 3, "mode": "strict", "weights": {"default": 0}},
        "single": {"concurrency": 1, "mode": "strict", "weights": {"single": 0}}}}),
        "concurrency": "4", "busy": "2"}, {})
    assert (eight.concurrency, eight.threads, eight.async_slots) == (4, 4, 0)
