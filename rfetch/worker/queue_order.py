"""The order in which a worker tries its queues on each fetch."""

from __future__ import annotations

import random

from rfetch.config import Config


class QueueOrder:
    """Sidekiq's queue order: strict as listed, or weighted random per fetch.

    With weights, each queue appears ``weight`` times in a list that is shuffled for every
    fetch and then de-duplicated (Sidekiq's BasicFetch#queues_cmd), so ``critical,2`` is
    first twice as often as a queue of weight 1.
    """

    def __init__(self, config: Config, rng: random.Random | None = None) -> None:
        self.strict = config.is_strict
        self.names = [q.name for q in config.queues]
        self._expanded = [q.name for q in config.queues for _ in range(q.weight)]
        self._rng = rng or random.Random()

    def next(self) -> list[str]:
        """The queue names in the order to try for one fetch."""
        if self.strict or len(self.names) == 1:
            return list(self.names)
        self._rng.shuffle(self._expanded)
        return list(dict.fromkeys(self._expanded))
