"""The job a periodic schedule pushes: an ordinary Sidekiq payload, built by the client's
rules, with two more fields: ``periodic`` (the schedule's name) and ``tick`` (the tick's
time, whole epoch seconds), through the client middleware."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from redis import Redis

from rfetch.config import Config
from rfetch.errors import ConfigError
from rfetch.jobs.middleware import run_client_chain
from rfetch.jobs.payload import Payload, dumps
from rfetch.jobs.schedule import Schedule
from rfetch.periodic.ticker import BuiltJob
from rfetch.push.client import Client


class PeriodicJobBuilder:
    """Builds periodic jobs with one client's payload rules.

    Args:
        config: ``client_middleware`` and ``max_payload_bytes``.
        client: builds the payload (field order, options, jid, timestamps).
        redis: handed to the client middleware, as on any push.
    """

    def __init__(self, config: Config, client: Client, redis: Redis) -> None:
        self.config = config
        self.client = client
        self.redis = redis

    def __call__(self, schedule: Schedule, tick: int) -> BuiltJob | None:
        """The job of ``tick`` of ``schedule``; None when a client middleware stopped it.

        Raises:
            PayloadTooLarge: the payload is over ``max_payload_bytes``.
        """
        return self.build(schedule.name, schedule.job_name, schedule.args, schedule.options,
                          tick)

    def build(
        self,
        name: str,
        job_name: str,
        args: Sequence[Any],
        options: Mapping[str, Any],
        tick: int,
    ) -> BuiltJob | None:
        """A periodic job from its parts (the API's "run now" builds from the stored
        definition).

        Args:
            name: the schedule's name (the ``periodic`` field).
            job_name: the registered job name (``class``).
            args: JSON-native arguments.
            options: job options.
            tick: the ``tick`` field, whole epoch seconds.

        Raises:
            ArgsNotSerializable, ConfigError: bad arguments or options.
            PayloadTooLarge: the payload is over ``max_payload_bytes``.
        """
        built = self.client.build(job_name, list(args), options, None)
        if built.get("priority"):
            raise ConfigError(
                f"periodic job {name} ({job_name}) has a priority: a periodic job is pushed "
                "to its queue's list (priority 0); leave priority out of its class or options"
            )
        built["periodic"] = name
        built["tick"] = tick
        payload: Payload | None = built
        chain = self.config.client_middleware
        if chain:
            payload = run_client_chain(chain, job_name, built, built["queue"], self.redis)
        if payload is None:
            return None
        text = dumps(payload, self.config.max_payload_bytes)
        return BuiltJob(str(payload["jid"]), str(payload["queue"]), text.encode("utf-8"))
