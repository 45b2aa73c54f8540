"""A Redis Cluster owned by a test: 3 masters and 3 replicas on 127.0.0.1.

Six ``redis-server --cluster-enabled yes`` nodes on free ports, joined with ``redis-cli
--cluster create ... --cluster-replicas 1 --cluster-yes``. Each node is signalled only by its
own PID.
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis

from tests.support.redis_server import RedisServer, redis_binary
from tests.support.wait import wait_for


def cluster_port() -> int:
    """A free port P with P + 10000 (the cluster bus) free too, below 55536."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20000, 45000)
        if all(_free(p) for p in (port, port + 10000)):
            return port
    raise RuntimeError("no free port pair for a cluster node")


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def redis_cli() -> str:
    """``redis-cli`` next to the redis-server in use (installed with it)."""
    found = shutil.which("redis-cli") or str(Path(redis_binary()).with_name("redis-cli"))
    if not Path(found).exists():  # pragma: no cover
        raise RuntimeError("no redis-cli next to redis-server")
    return found


class ClusterSet:
    """``masters`` masters with ``replicas`` replica each, joined into one cluster."""

    def __init__(self, masters: int = 3, replicas: int = 1) -> None:
        self.replicas = replicas
        self.nodes = [
            RedisServer(port=cluster_port(), extra_args=(
                "--cluster-enabled", "yes",
                "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", "2000",
                "--repl-diskless-sync-delay", "0",
            ))
            for _ in range(masters * (1 + replicas))
        ]

    @property
    def url(self) -> str:
        """A URL of one node (the client discovers the others)."""
        return self.nodes[0].url

    def start(self) -> None:
        for node in self.nodes:
            node.start()
        subprocess.run(
            [redis_cli(), "--cluster", "create",
             *(f"127.0.0.1:{node.port}" for node in self.nodes),
             "--cluster-replicas", str(self.replicas), "--cluster-yes"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60,
        )
        wait_for(self._ready, 60, "every node to report cluster_state:ok")

    def _ready(self) -> bool:
        for node in self.nodes:
            info = node.client(socket_timeout=1).execute_command("CLUSTER", "INFO")
            text = info.decode() if isinstance(info, bytes) else str(info)
            if "cluster_state:ok" not in text:
                return False
            replication = node.client(socket_timeout=1).info("replication")
            if replication.get("role") == "slave" and replication.get("master_link_status") != "up":
                return False
        return True

    def node_of(self, key: str) -> RedisServer:
        """The master node serving ``key``'s hash slot now."""
        client = self.nodes[0].client(socket_timeout=2)
        slot = int(client.execute_command("CLUSTER", "KEYSLOT", key))
        for start, end, master, *_ in client.execute_command("CLUSTER", "SLOTS"):
            if int(start) <= slot <= int(end):
                port = int(master[1])
                return next(node for node in self.nodes if node.port == port)
        raise RuntimeError(f"no node serves slot {slot}")

    def replica_of(self, master: RedisServer) -> RedisServer:
        """A replica of ``master``."""
        for node in self.nodes:
            info = node.client(socket_timeout=2).info("replication")
            if info.get("role") == "slave" and int(info.get("master_port", 0)) == master.port:
                return node
        raise RuntimeError(f"no replica of the node on port {master.port}")

    def failover(self, key: str, timeout: float = 30.0) -> tuple[RedisServer, RedisServer]:
        """``CLUSTER FAILOVER`` on a replica of ``key``'s master: the replica becomes master
        (a manual, lossless failover). Returns (old master, new master)."""
        old = self.node_of(key)
        new = self.replica_of(old)
        deadline = time.monotonic() + timeout
        # A manual failover times out (5 s) when the master has not yet learnt its replica's
        # offset over the cluster bus, just after the cluster formed: ask again.
        while True:
            new.client(socket_timeout=5).execute_command("CLUSTER", "FAILOVER")
            if wait_for(lambda: self.node_of(key).port == new.port, 7, fail=False):
                return old, new
            if time.monotonic() > deadline:
                raise AssertionError(f"CLUSTER FAILOVER to port {new.port} did not happen")

    def client(self) -> redis.RedisCluster:
        return redis.RedisCluster(host="127.0.0.1", port=self.nodes[0].port, socket_timeout=5)

    def cleanup(self) -> None:
        for node in self.nodes:
            node.cleanup()


__all__ = ["ClusterSet", "redis_cli"]
