"""A relay built from a :class:`rfetch.Config` and a database URL: what ``rfetch relay``
and a worker's relay thread run."""

from __future__ import annotations

import threading
from dataclasses import replace

from rfetch.config import Config
from rfetch.errors import ConfigError
from rfetch.outbox.connection import Database, connect
from rfetch.outbox.listener import NotifyWaiter, PollWaiter, Waiter
from rfetch.outbox.relay import Relay, RelaySettings
from rfetch.store.commands import Commands
from rfetch.store.connection import connect as connect_redis
from rfetch.store.keys import Keys
from rfetch.store.outbox_commands import OutboxCommands

NOTIFY_SAFETY_NET = 1.0
"""Seconds between two looks at an idle PostgreSQL outbox when no NOTIFY came (one missed
by a listener reconnecting)."""


def build_relay(
    config: Config, url: str, settings: RelaySettings | None = None, *, poll: float | None = None
) -> Relay:
    """A relay of the outbox at ``url`` to the Redis of ``config``.

    Args:
        config: the Redis URL and namespace the jobs go to.
        url: the outbox's database (see :func:`rfetch.outbox.connection.connect`).
        settings: batch size, marker TTL, attempts (their defaults when None).
        poll: seconds between looks at an idle table; None: 1 s on PostgreSQL (which wakes
            the relay by NOTIFY), 0.05 s elsewhere.

    Raises:
        ConfigError: a bad URL, a missing driver, or ``config.shards`` (the relay pushes
            to one Redis).
    """
    if config.shards:
        raise ConfigError("the outbox relay pushes to one Redis; it does not support shards")
    probe = connect(url)  # fails now on a bad URL or an unreachable database
    name = probe.dialect.name
    probe.close()
    settings = settings or RelaySettings()
    if poll is None:
        poll = NOTIFY_SAFETY_NET if name == "postgresql" else settings.poll_interval
    if poll <= 0:
        raise ConfigError(f"the relay's poll interval must be > 0 seconds, not {poll}")
    settings = replace(settings, poll_interval=poll)
    waiter: Waiter = (
        NotifyWaiter(lambda: connect(url, autocommit=True))
        if name == "postgresql"
        else PollWaiter()
    )
    commands = OutboxCommands(Commands(connect_redis(config), Keys(config.namespace)))
    return Relay(lambda: connect(url), commands, waiter, settings)


def start_thread(relay: Relay, stop: threading.Event) -> threading.Thread:
    """Run ``relay`` in a daemon thread until ``stop`` is set (a worker's relay thread)."""
    thread = threading.Thread(target=relay.run, args=(stop,), name="rfetch-outbox-relay",
                              daemon=True)
    thread.start()
    return thread


def migrate(url: str) -> Database:
    """Create the outbox table (and on PostgreSQL its NOTIFY trigger) at ``url``; running it
    again changes nothing. Returns the (closed) database, for its dialect.

    Raises:
        ConfigError: a bad URL or a missing driver; the driver's errors.
    """
    db = connect(url, autocommit=True)
    try:
        for statement in db.dialect.create:
            db.execute(statement)
    finally:
        db.close()
    return db
