"""Jobs that log, print and fail, for the tests of a worker's log output; workers load
them with ``-r logjobs``."""

from __future__ import annotations

import logging

import rfetch

app_log = logging.getLogger("myapp.billing")


class Chatty(rfetch.Job):
    """Prints, then logs through the application's own logger at DEBUG, INFO and WARNING."""

    def perform(self, word: str) -> None:
        print(f"printed {word}")
        app_log.debug("debug %s", word)
        app_log.info("info %s", word)
        app_log.warning("warning %s", word)


def explode_deep_inside(word: str) -> None:
    raise ValueError(f"cannot bill {word}")


class Explodes(rfetch.Job):
    """Fails from a nested function, so its traceback names a frame the log must show."""

    retry = 0

    def perform(self, word: str) -> None:
        explode_deep_inside(word)


class PushesElsewhere(rfetch.Job):
    """Pushes a job to the Redis at ``url`` (down in the test): reliable push buffers it, and
    the worker process's exit must say that it was not delivered."""

    def perform(self, url: str) -> None:
        client = rfetch.Client(rfetch.Config.from_env(redis_url=url))
        print(f"buffered {client.push('app.Report', [1])}")
