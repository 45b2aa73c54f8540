"""``rfetch worker -r benchmarks.peers.rfetch_quiet``: rfetch's per-job "start" and "done"
INFO lines off (the ``rfetch.job`` logger at WARNING), its other lines kept; the quiet
setting of ``benchmarks.compare --logging quiet``. rfetch has no log-level option, and
``rfetch worker`` sets the level of the ``rfetch`` logger only, so this one stays. A setup
module (it defines ``configure_worker``), so the worker does not warn that it adds no job."""

from __future__ import annotations

import logging

import rfetch


def configure_worker(config: rfetch.Config) -> None:
    """Called by ``rfetch worker`` after the ``-r`` imports, before the first job."""
    logging.getLogger("rfetch.job").setLevel(logging.WARNING)
