"""Framework adapters for ``benchmarks.compare``; see ``base.py`` for the interface."""

from __future__ import annotations

import importlib

from benchmarks.peers.base import Peer

ADAPTERS = ("rfetch", "sidekiq", "dramatiq", "huey", "arq", "rq", "celery")


def all_peers() -> list[Peer]:
    """Every adapter's peers, rfetch first (importing an adapter imports no framework)."""
    peers: list[Peer] = []
    for name in ADAPTERS:
        peers.extend(importlib.import_module(f"benchmarks.peers.{name}").PEERS)
    return peers
