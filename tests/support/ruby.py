"""Ruby's Sidekiq, for the compatibility tests: whether it is installed (Debian's
ruby-sidekiq), and a way to run a Ruby script against the tests' Redis."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any

import pytest


def _sidekiq_available(extra: str = "") -> bool:
    """Whether ``ruby`` can require Sidekiq and its API (and ``extra``, a gem)."""
    if shutil.which("ruby") is None:
        return False
    script = 'require "sidekiq"; require "sidekiq/api"' + (f'; require "{extra}"' if extra else "")
    try:
        found = subprocess.run(
            ["ruby", "-e", script],
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return found.returncode == 0


needs_ruby = pytest.mark.skipif(
    not _sidekiq_available(), reason="needs ruby and the sidekiq gem (Debian's ruby-sidekiq)"
)


needs_ruby_namespace = pytest.mark.skipif(
    not _sidekiq_available("redis-namespace"),
    reason="needs ruby, the sidekiq gem and redis-namespace (Debian's ruby-redis-namespace)",
)


def ruby(redis_url: str, script: str) -> Any:
    """Run ``script`` after requiring Sidekiq's client and API; it must ``puts`` one JSON."""
    prelude = 'require "sidekiq"; require "sidekiq/api"; require "json"\n'
    done = subprocess.run(
        ["ruby", "-e", prelude + script],
        env={**os.environ, "REDIS_URL": redis_url},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])
