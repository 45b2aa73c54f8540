"""Periodic jobs: cron schedules pushed exactly once per tick by an elected leader.

See ``docs/periodic.md``. Modules: :mod:`~rfetch.jobs.cron` (expressions and time
zones), :mod:`~rfetch.jobs.schedule` (registration and checks),
:mod:`~rfetch.periodic.catchup` (which ticks to push or skip), :mod:`~rfetch.periodic.lease`
(the leader lease), :mod:`~rfetch.periodic.ticker` (the pushes),
:mod:`~rfetch.periodic.service` (the worker's leader thread) and
:mod:`~rfetch.periodic.current` (:func:`rfetch.is_leader`).
"""

from rfetch.jobs.cron import Cron
from rfetch.jobs.schedule import PeriodicRegistry, Schedule
from rfetch.periodic.current import is_leader

__all__ = ["Cron", "PeriodicRegistry", "Schedule", "is_leader"]
