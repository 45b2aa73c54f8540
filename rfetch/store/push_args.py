"""``push.lua``'s arguments: the one place that knows its KEYS and ARGV order, for the sync
client (:meth:`rfetch.store.commands.Commands.push`) and the asyncio one
(:class:`rfetch.store.async_commands.AsyncCommands`), and the reading of its reply.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from redis.exceptions import ResponseError

from rfetch.errors import QueueFull
from rfetch.store.job_record import job_record
from rfetch.store.keys import Keys
from rfetch.store.replies import Outgoing


def gate_keys(
    keys: Keys, queue: str, ordering_key: str | None = None, unique: str | None = None
) -> list[str]:
    """The seven keys of ``queue``'s gate, in ``lib/gate.lua``'s G order, then the waiting
    list of ``ordering_key`` and the lock of ``unique`` when given."""
    out = [keys.queue(queue), keys.queues, keys.key_holders(queue), keys.key_leases(queue)]
    out += [keys.fair_ring(queue), keys.fair_wake(queue), keys.fair_queues]
    if ordering_key is not None:
        out.append(keys.key_list(queue, ordering_key))
    if unique is not None:
        out.append(keys.unique(unique))
    return out


PLAIN_MAX = 1000
"""The most payloads of one ``push_plain.lua`` call (one LPUSH: Lua's stack bounds
``unpack``); a larger push goes to ``push.lua``, which splits its LPUSH."""


def plain_call(
    keys_of: Keys, jobs: Sequence[Outgoing], max_sizes: Mapping[str, int] | None = None
) -> tuple[list[str], list[str]] | None:
    """``push_plain.lua``'s KEYS and ARGV when ``jobs`` are plain jobs of one queue to run
    now (no routing, no run time) with no ``max_queue_size`` to check: the common
    ``perform_async``; else None (the push goes to ``push.lua``)."""
    if not jobs or len(jobs) > PLAIN_MAX:
        return None
    queue = jobs[0].queue
    for job in jobs:
        if job.routing is not None or job.at is not None or job.queue != queue:
            return None
    if max_sizes and queue in max_sizes:
        return None
    return [keys_of.queue(queue), keys_of.queues], [queue, *(job.text for job in jobs)]


def queue_full(exc: ResponseError) -> Exception:
    """:class:`rfetch.errors.QueueFull` for ``push.lua``'s QUEUEFULL reply, else ``exc``."""
    text = str(exc)
    return QueueFull(text.removeprefix("QUEUEFULL ")) if text.startswith("QUEUEFULL") else exc


def push_written(refused: Sequence[int | bytes | str], count: int) -> list[bool]:
    """Per job of a ``push.lua`` call of ``count`` jobs, whether it was written, from the
    script's reply: the 1-based positions of the jobs whose unique lock was held."""
    written = [True] * count
    for position in refused:
        written[int(position) - 1] = False
    return written


def push_call(
    keys_of: Keys, jobs: Sequence[Outgoing], max_sizes: Mapping[str, int] | None = None
) -> tuple[list[str], list[str | int]]:
    """``push.lua``'s KEYS and ARGV for ``jobs`` (see
    :meth:`rfetch.store.commands.Commands.push`), for the sync and the asyncio client: runs
    of plain jobs to run now as one record each (one LPUSH per run), every other job as
    its own record; first, one size check per queue of ``max_sizes`` (queue name ->
    max_queue_size) that gets jobs to run now. A job through the gate carries its record
    (:mod:`rfetch.store.job_record`), whose keys ``push.lua`` derives from the prefix."""
    keys = [keys_of.schedule, keys_of.prefix]
    blocks: dict[str, int] = {}
    incoming: dict[str, int] = {}
    for job in jobs:
        if job.queue not in blocks:
            blocks[job.queue] = len(blocks) + 1
            keys += gate_keys(keys_of, job.queue)
        if job.at is None:
            incoming[job.queue] = incoming.get(job.queue, 0) + 1
    args: list[str | int] = [len(blocks), *blocks, 0]
    records = 0
    for queue, count in incoming.items():
        size = (max_sizes or {}).get(queue)
        if size is not None:
            args += ["m", blocks[queue], size, count]
            records += 1
    run: list[str] = []  # the open run of plain jobs to run now, all of run_queue
    run_queue = ""
    for job in jobs:
        routing = job.routing
        if routing is None and job.at is None:
            if run and run_queue != job.queue:
                args += ["p", blocks[run_queue], len(run), *run]
                records += 1
                run = []
            run_queue = job.queue
            run.append(job.text)
            continue
        if run:
            args += ["p", blocks[run_queue], len(run), *run]
            records += 1
            run = []
        records += 1
        at = "" if job.at is None else repr(job.at)
        if routing is None:
            args += ["s", blocks[job.queue], job.text, at]
            continue
        record = job_record(job.queue, routing, job.window_ms)
        args += ["g", blocks[job.queue], job.text, at, record]
    if run:
        args += ["p", blocks[run_queue], len(run), *run]
        records += 1
    args[len(blocks) + 1] = records
    return keys, args
