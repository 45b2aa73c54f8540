"""The ``rfetch`` command line (click): ``rfetch worker``, ``rfetch web``, ``rfetch enqueue``
and the admin commands, which see and steer jobs through :mod:`rfetch.api`.

Modules: :mod:`.app` (the group), :mod:`.worker` and :mod:`.worker_launch` (boot a
worker: the only modules that import the worker's side), :mod:`.web`, :mod:`.enqueue`, the
admin commands by what they act on (:mod:`.queues`, :mod:`.sets`, :mod:`.processes`,
:mod:`.groups`, :mod:`.concurrency`, :mod:`.periodic`, :mod:`.limits`, :mod:`.diagnose`,
:mod:`.cancel`, :mod:`.workflows`, :mod:`.batches`), the outbox (:mod:`.outbox`:
``rfetch outbox``, ``rfetch relay``), their shared options (:mod:`.options`) and their
table output (:mod:`.output`).
"""

from __future__ import annotations

from . import (
    batches,
    cancel,
    concurrency,
    diagnose,
    enqueue,
    groups,
    limits,
    outbox,
    periodic,
    processes,
    queues,
    sets,
    web,
    worker,
    workflows,
)
from .app import main

__all__ = ["main"]

# Importing a command module registers its commands on ``main``.
_COMMANDS = (
    batches, cancel, concurrency, diagnose, enqueue, groups, limits, outbox, periodic, processes,
    queues, sets, web, worker, workflows,
)
