"""``fetch.lua``'s KEYS and ARGV (:meth:`rfetch.store.commands.Commands.fetch`): the queue
pairs, the fair queues' rings, the fetch caps' key blocks, and the acknowledgements sorted
into the script's four record kinds (plain, capped slot, releasing, batched), in the order
of the script's header. Built once per fetch call, not per job moved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rfetch.store.caps import cap_keys
from rfetch.store.keys import Keys
from rfetch.store.push_args import gate_keys
from rfetch.store.replies import Fetched

Arg = bytes | str | int


@dataclass
class _Acks:
    """The acknowledgements sorted into ``fetch.lua``'s records, with the keys they add."""

    cap_pairs: dict[int, None]
    gate: list[str] = field(default_factory=list)  # releasing records' keys (gate, batch)
    plain: list[Arg] = field(default_factory=list)
    slots: list[Arg] = field(default_factory=list)
    releasing: list[Arg] = field(default_factory=list)
    batched: list[Arg] = field(default_factory=list)
    batch_keys: list[str] = field(default_factory=list)


def _sort_acks(
    k: Keys, index: Mapping[str, int], acks: Sequence[Fetched], acked: _Acks
) -> None:
    """Append each of ``acks`` to its record kind in ``acked`` (``index``: queue name ->
    its 1-based pair in KEYS)."""
    cap_pairs, gate, plain = acked.cap_pairs, acked.gate, acked.plain  # locals in the loop
    slots, releasing, batched = acked.slots, acked.releasing, acked.batched
    batch_keys = acked.batch_keys
    for unit in acks:
        routing = unit.routing
        if routing is not None and routing.capped and not (
            routing.ordering_key or routing.unique or routing.bid
        ):
            slots += [index[unit.queue], unit.raw, routing.concurrency_key or ""]
            cap_pairs[index[unit.queue]] = None
        elif routing is not None and routing.locking:
            key, unique = routing.ordering_key, routing.unique
            releasing += [index[unit.queue], unit.raw, unit.queue, routing.jid]
            releasing += [key or "", unique or "", routing.concurrency_key or ""]
            releasing.append("1" if routing.bid else "")
            if routing.capped:
                cap_pairs[index[unit.queue]] = None
            if key is not None or unique is not None:
                gate += gate_keys(k, unit.queue, key, unique)
            if routing.bid:  # after its gate keys, in the releasing record's order
                gate.append(k.batch(routing.bid))
        elif routing is not None and routing.bid:
            batched += [index[unit.queue], unit.raw, routing.jid]
            batch_keys.append(k.batch(routing.bid))
        else:
            plain.append(index[unit.queue])
            plain.append(unit.raw)


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
) -> tuple[list[str], list[Arg]]:
    """``fetch.lua``'s KEYS and ARGV; the arguments are those of
    :meth:`rfetch.store.commands.Commands.fetch`.

    Raises:
        KeyError: an acknowledgement's queue is not named.
    """
    keys: list[str] = []
    for name in names:
        keys.append(public[name])
        keys.append(private[name])
    index = {name: i for i, name in enumerate(names, 1)}
    fair_pairs = [index[name] for name in fair]
    for name in fair:
        keys += [k.fair_ring(name), k.fair_credits(name), k.fair_weights(name)]
    acked = _Acks(dict.fromkeys(index[name] for name in capped))
    _sort_acks(k, index, acks, acked)
    cap_pairs = acked.cap_pairs
    for pair in cap_pairs:
        keys += cap_keys(k, names[pair - 1])
    keys += acked.gate
    if acked.batch_keys or any(u.routing is not None and u.routing.bid for u in acks):
        keys += [*acked.batch_keys, k.prefix]
    args: list[Arg] = [limit, len(names), fetch_count, len(fair_pairs)]
    args += fair_pairs
    args.append(len(cap_pairs))
    fetched = {index[name] for name in capped}
    for pair in cap_pairs:
        args += [pair, 1 if pair in fetched else 0]
    args.append(len(acked.plain) // 2)
    args += acked.plain
    args.append(len(acked.slots) // 3)
    args += acked.slots
    args.append(len(acked.releasing) // 8)
    args += acked.releasing
    args.append(len(acked.batched) // 3)
    args += acked.batched
    return keys, args
