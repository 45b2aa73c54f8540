"""Periodic jobs: cron schedules pushed exactly once per tick by an elected leader.

See ``docs/periodic.md``. Modules: :mod:`~rfetch.periodic.cron` (expressions and time
zones), :mod:`~rfetch.periodic.schedule` (registration and checks),
:mod:`~rfetch.periodic.catchup` (which ticks to push or skip), :mod:`~rfetch.periodic.lease`
(the leader lease), :mod:`~rfetch.periodic.ticker` (the pushes),
:mod:`~rfetch.periodic.service` (the worker's leader thread) and
:mod:`~rfetch.periodic.current` (:func:`rfetch.is_leader`).
"""

from rfetch.periodic.cron import Cron
from rfetch.periodic.current import is_leader
from rfetch.periodic.schedule import PeriodicRegistry, Schedule

__all__ = ["Cron", "PeriodicRegistry", "Schedule", "is_leader"]
