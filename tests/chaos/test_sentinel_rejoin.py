"""Chaos, Sentinel tier: the harness's rejoin of a killed master (``SentinelSet.
restart_as_replica``) survives a second failover.

The killed master comes back empty (no persistence) as a replica, and its full sync waits
5 s (Redis's diskless sync delay). If the new master stalls meanwhile for longer than
``down-after-milliseconds``, the sentinels fail over again; were the empty server electable,
they would promote it and turn the new master into its replica, which then resyncs from it:
every job gone. That is how ``test_sentinel_failover.py`` lost 86 and 163 jobs on a loaded
machine. Here the stall is a SIGSTOP of 2 s of the new master, by its PID.
"""

from __future__ import annotations

import threading
import time

import pytest
import redis

from tests.support.sentinel import MASTER_NAME, SentinelSet
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

JOBS = 100


def named_by_all(cluster: SentinelSet, port: int) -> bool:
    """Whether every sentinel names ``port`` as the master."""
    for sentinel in cluster.sentinels:
        try:
            _, named = redis.Redis(port=sentinel.port, socket_timeout=1).execute_command(
                "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME
            )
        except (redis.ConnectionError, redis.TimeoutError):
            return False
        if int(named) != port:
            return False
    return True


def seen_as_replica(cluster: SentinelSet, port: int) -> bool:
    """Whether every sentinel lists ``port`` as a replica that answers (a candidate for
    promotion, but for its priority)."""
    for sentinel in cluster.sentinels:
        try:
            replicas = redis.Redis(port=sentinel.port, socket_timeout=1).sentinel_slaves(
                MASTER_NAME
            )
        except (redis.ConnectionError, redis.TimeoutError):
            return False
        if not any(
            int(r["port"]) == port and not r["is_sdown"] and not r["is_disconnected"]
            and int(r["info-refresh"]) < 2000
            for r in replicas
        ):
            return False
    return True


def test_a_second_failover_never_promotes_the_emptied_old_master() -> None:
    cluster = SentinelSet()
    cluster.start()
    try:
        master = cluster.current_master()
        replica = cluster.replica if master is cluster.master else cluster.master
        master.client().rpush("queue:default", *[f"job {i}" for i in range(JOBS)])
        wait_for(lambda: replica.client().llen("queue:default") == JOBS, 10, "replication")
        killed, _ = cluster.kill_master()
        new = cluster.current_master()
        wait_for(lambda: named_by_all(cluster, new.port), 60, "every sentinel to switch")

        rejoin = threading.Thread(target=cluster.restart_as_replica, args=(killed,))
        rejoin.start()
        wait_for(lambda: killed.proc is not None and _answers(killed.client()), 10,
                 "the old master to start again")
        wait_for(lambda: seen_as_replica(cluster, killed.port), 10,
                 "every sentinel to see the old master as a live replica")
        new.freeze()  # the sentinels take the new master for down and fail over again
        try:
            time.sleep(3.0)
        finally:
            new.thaw()
        rejoin.join(60)

        master_now = cluster.current_master()
        assert master_now.client().llen("queue:default") == JOBS, (
            f"master now {master_now.port} (the new master was {new.port}); sentinels:\n"
            + "\n".join(s.log_tail() for s in cluster.sentinels)
        )
    finally:
        cluster.cleanup()


def _answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except (redis.ConnectionError, redis.TimeoutError):
        return False
