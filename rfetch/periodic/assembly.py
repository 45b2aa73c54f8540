"""Builds a worker process's leader thread from its Config: the lease, the ticker of its
schedules and the Redis calls behind them."""

from __future__ import annotations

from rfetch.config import Config
from rfetch.periodic.jobs import PeriodicJobBuilder
from rfetch.periodic.lease import LeaderLease
from rfetch.periodic.service import PeriodicService, Reporter, leader_guard
from rfetch.periodic.store import PeriodicStore
from rfetch.periodic.ticker import Ticker
from rfetch.push.client import Client
from rfetch.store.commands import Commands
from rfetch.store.connection import connect


def leader_service(
    config: Config, commands: Commands, identity: str, report: Reporter
) -> PeriodicService:
    """The leader thread of one worker process.

    Args:
        config: ``leader_ttl``, ``periodic`` and the client settings of the pushed jobs.
        commands: the worker's typed script calls (and its Redis client).
        identity: the worker's identity.
        report: calls the error handlers.
    """
    # The followers block on the wake list for up to a lease: their own connection, with
    # a socket timeout longer than that wait.
    blocking = connect(
        config, max_connections=2, socket_timeout=config.leader_ttl + config.network_timeout
    )
    store = PeriodicStore(commands, blocking)
    lease = LeaderLease(store, identity, config.leader_ttl)
    ticker = None
    if config.periodic:
        redis = commands.redis
        builder = PeriodicJobBuilder(config, Client(config, redis), redis)
        ticker = Ticker(list(config.periodic), store, builder, config.leader_ttl)
    return PeriodicService(lease, ticker, leader_guard(report, commands.redis))
