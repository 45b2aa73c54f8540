"""``fetch.lua``'s KEYS and ARGV (:meth:`rfetch.store.commands.Commands.fetch`): the queue
pairs, the fair queues' rings, the fetch caps' key blocks, the priority sets, and the
acknowledgements: plain
ones (a bare LREM) and those with a record (:mod:`rfetch.store.job_record`: an ordering
key, a unique lock, a cap's slot, a batch...), in the order of the script's header. Built
once per fetch call, not per job moved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rfetch.store.caps import cap_keys
from rfetch.store.job_record import job_record, needs_record
from rfetch.store.keys import Keys
from rfetch.store.replies import Fetched

Arg = bytes | str | int


def _acks(index: Mapping[str, int], acks: Sequence[Fetched]) -> tuple[list[Arg], list[Arg]]:
    """``acks`` as fetch.lua's plain records (pair, payload) and records with a job record
    (pair, payload, record); ``index``: queue name -> its 1-based pair in KEYS."""
    plain: list[Arg] = []
    recorded: list[Arg] = []
    for unit in acks:
        routing = unit.routing
        if needs_record(routing):
            recorded += [index[unit.queue], unit.raw, job_record(unit.queue, routing)]
        else:
            plain += [index[unit.queue], unit.raw]
    return plain, recorded


def fetch_call(
    k: Keys,
    names: Sequence[str],
    public: Mapping[str, str],
    private: Mapping[str, str],
    fetch_count: int,
    limit: int,
    fair: Sequence[str],
    acks: Sequence[Fetched],
    capped: Sequence[str] = (),
    prio: Sequence[str] = (),
) -> tuple[list[str], list[Arg]]:
    """``fetch.lua``'s KEYS and ARGV; the arguments are those of
    :meth:`rfetch.store.commands.Commands.fetch`.

    Raises:
        KeyError: an acknowledgement's queue is not named.
    """
    capped = list(dict.fromkeys(capped))
    keys: list[str] = []
    for name in names:
        keys.append(public[name])
        keys.append(private[name])
    index = {name: i for i, name in enumerate(names, 1)}
    for name in fair:
        keys += [k.fair_ring(name), k.fair_credits(name), k.fair_weights(name)]
    for name in capped:
        keys += cap_keys(k, name)
    prio = list(dict.fromkeys(prio))
    keys += [k.prio(name) for name in prio]
    plain, recorded = _acks(index, acks)
    if recorded:
        keys.append(k.prefix)
    args: list[Arg] = [limit, len(names), fetch_count, len(fair)]
    args += [index[name] for name in fair]
    args.append(len(capped))
    args += [index[name] for name in capped]
    args.append(len(prio))
    args += [index[name] for name in prio]
    args.append(len(plain) // 2)
    args += plain
    args.append(len(recorded) // 3)
    args += recorded
    return keys, args
