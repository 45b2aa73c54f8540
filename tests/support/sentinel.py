"""A Redis Sentinel set owned by a test: 1 master, 1 replica, 3 sentinels, on 127.0.0.1.

Every process is started on a free port and signalled only by its own PID. Sentinels are
``redis-server <conf> --sentinel`` with a config file in their own folder (Sentinel rewrites
it); failure detection is shortened (``down-after-milliseconds`` 1000) so that a SIGKILL of
the master is followed by a promotion within a few seconds.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import redis

from tests.support.redis_server import RedisServer, free_port, redis_binary
from tests.support.wait import wait_for

MASTER_NAME = "mymaster"


class SentinelProcess:
    """One ``redis-server --sentinel`` watching ``MASTER_NAME``."""

    def __init__(self, master_port: int, quorum: int) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="rfetch-sentinel-"))
        (self.dir / "sentinel.conf").write_text(
            f"port {self.port}\n"
            "bind 127.0.0.1\n"
            f"dir {self.dir}\n"
            f"logfile {self.dir / 'sentinel.log'}\n"
            f"sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} {quorum}\n"
            f"sentinel down-after-milliseconds {MASTER_NAME} 1000\n"
            f"sentinel failover-timeout {MASTER_NAME} 5000\n"
            f"sentinel parallel-syncs {MASTER_NAME} 1\n"
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [redis_binary(), str(self.dir / "sentinel.conf"), "--sentinel"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(self._answers, 60, lambda: f"sentinel on {self.port}: {self.log_tail()}")

    def _answers(self) -> bool:
        try:
            redis.Redis(port=self.port, socket_timeout=0.5).ping()
            return True
        except (redis.ConnectionError, redis.TimeoutError):
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"sentinel exited: {self.log_tail()}") from None
            return False

    def log_tail(self) -> str:
        try:
            return (self.dir / "sentinel.log").read_text()[-2000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class SentinelSet:
    """A master, a replica of it and ``sentinels`` sentinels (quorum 2).

    Attributes:
        master, replica: the two data servers; which one is master changes on failover.
    """

    def __init__(self, sentinels: int = 3) -> None:
        self.master = RedisServer()
        self.replica = RedisServer(
            extra_args=("--replicaof", "127.0.0.1", str(self.master.port))
        )
        self.sentinels = [SentinelProcess(self.master.port, quorum=2) for _ in range(sentinels)]

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{MASTER_NAME}/0"

    def start(self) -> None:
        self.master.start()
        self.replica.start()
        wait_for(self._replica_linked, 60, "the replica to sync with the master")
        for sentinel in self.sentinels:
            sentinel.start()
        wait_for(self._sentinels_ready, 60, "every sentinel to see the replica and the others")

    def _replica_linked(self) -> bool:
        info = self.replica.client(socket_timeout=1).info("replication")
        return info.get("master_link_status") == "up"

    def _sentinels_ready(self) -> bool:
        for sentinel in self.sentinels:
            state = redis.Redis(port=sentinel.port, socket_timeout=1).sentinel_master(MASTER_NAME)
            if state["num-slaves"] < 1 or state["num-other-sentinels"] < len(self.sentinels) - 1:
                return False
        return True

    def master_port(self) -> int:
        """The port the sentinels name as master now."""
        for sentinel in self.sentinels:
            try:
                _, port = redis.Redis(port=sentinel.port, socket_timeout=1).execute_command(
                    "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME
                )
                return int(port)
            except (redis.ConnectionError, redis.TimeoutError):
                continue
        raise RuntimeError("no sentinel answered")

    def current_master(self) -> RedisServer:
        port = self.master_port()
        return self.master if self.master.port == port else self.replica

    def kill_master(self, timeout: float = 30.0) -> tuple[RedisServer, float]:
        """SIGKILL the current master and wait for the sentinels to promote the other one.

        Returns:
            The killed server, and the seconds until a new master was named.
        """
        old = self.current_master()
        start = time.monotonic()
        old.kill()
        wait_for(lambda: self.master_port() != old.port, timeout, "a failover")
        return old, time.monotonic() - start

    def restart_as_replica(self, server: RedisServer) -> None:
        """Start a killed server again (empty) as a replica of the current master.

        It starts with ``replica-priority 0`` and gets the default priority (100) back once
        it has synced: until then it holds nothing, and a second failover must not promote
        it. On a loaded 2-core machine one sentinel marked the new master down 1 s after
        switching to it (``down-after-milliseconds`` 1000), a second failover promoted the
        empty server, the new master was turned into its replica and resynced from it, and
        the jobs it held were gone: the chaos test counted them as lost (86 and 163 jobs).
        Redis's own docs warn against restarting a master without persistence.
        """
        new_master = self.master_port()
        server.extra_args = (
            "--replicaof", "127.0.0.1", str(new_master), "--replica-priority", "0"
        )
        server.start()
        wait_for(
            lambda: server.client(socket_timeout=1).info("replication").get("master_link_status")
            == "up",
            20,
            "the old master to sync as a replica",
        )
        server.client(socket_timeout=1).config_set("replica-priority", 100)

    def cleanup(self) -> None:
        for sentinel in self.sentinels:
            sentinel.cleanup()
        self.master.cleanup()
        self.replica.cleanup()
