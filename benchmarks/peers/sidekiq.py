"""Sidekiq 6.4 (Ruby, Debian's ruby-sidekiq): ``sidekiq -r sidekiq_jobs.rb -c C``, BRPOP
fetch (not reliable: Sidekiq Pro's reliable fetch is not free software), ``push_bulk`` for
bulk enqueue, and a Ruby client (``sidekiq_client.rb``) for the latency pushes."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from benchmarks.peers.base import Peer, Runtime

HERE = Path(__file__).resolve().parent


class SidekiqPeer(Peer):
    key = "sidekiq"
    label = "Sidekiq (Ruby)"
    fetch = "BRPOP, not reliable"
    per_job_lines = "2 INFO lines (start, done); quiet: Sidekiq.logger at WARN (sidekiq_jobs.rb)"

    def version(self, rt: Runtime) -> str | None:
        if not (shutil.which("ruby") and shutil.which("sidekiq")):
            return None
        out = subprocess.run(
            ["ruby", "-e", 'require "sidekiq"; print Sidekiq::VERSION, " / Ruby ", RUBY_VERSION'],
            capture_output=True, text=True, timeout=60,
        )
        return out.stdout.strip() if out.returncode == 0 else None

    def worker_argv(self, rt: Runtime, concurrency: int, queues: Sequence[str]) -> list[str]:
        sidekiq = shutil.which("sidekiq") or "sidekiq"
        argv = [sidekiq, "-r", str(HERE / "sidekiq_jobs.rb"), "-c", str(concurrency)]
        for queue in queues:
            argv += ["-q", queue]
        return argv

    def client_argv(self, rt: Runtime, args: Sequence[str]) -> list[str]:
        return ["ruby", str(HERE / "sidekiq_client.rb"), *args]


PEERS = [SidekiqPeer()]
