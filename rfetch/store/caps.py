"""The key block of a queue's fetch caps (concurrency keys), in ``lib/cap.lua``'s C order:
the one place that knows it, used by the typed calls that fetch from a capped queue or
make a capped job wait (:class:`rfetch.store.commands.Commands`), and by the admin API. The
ending scripts derive the same keys from the namespace prefix (``lua/lib/keys.lua``).
"""

from __future__ import annotations

from rfetch.store.keys import Keys


def cap_keys(keys: Keys, queue: str) -> list[str]:
    """The six cap keys of ``queue``: ready ring, held counts, slots, limits, wake list,
    and the set of capped queues."""
    return [
        keys.cap_ring(queue),
        keys.cap_held(queue),
        keys.cap_slots(queue),
        keys.cap_limits(queue),
        keys.fair_wake(queue),
        keys.cap_queues,
    ]
