"""One typed call per Lua script in ``rfetch/lua/``: the only code that knows each script's
KEYS and ARGV order (as BullMQ's ``Scripts`` class builds every script's arguments in one
function per script).

:class:`Commands` is built once per Redis client (worker, client and admin API each build
one) on the scripts :class:`rfetch.store.scripts.Scripts` registers. Its methods live in
one class per domain: the worker's (:mod:`rfetch.store.job_commands`), recovery
(:mod:`rfetch.store.recovery_commands`), push and scheduling
(:mod:`rfetch.store.schedule_commands`), the admin API (:mod:`rfetch.store.admin_commands`)
and the leader (:mod:`rfetch.store.leader_commands`). Every key a script touches is passed
in KEYS, except the derived keys each script's header names (a tenant's list, and the
queues ``enqueue_due.lua`` reads from its jobs); with a ``{tag}`` namespace these share the
namespace's hash slot.
"""

from __future__ import annotations

from rfetch.store.admin_commands import AdminCommands
from rfetch.store.command_base import Client, Outcome, queue_script
from rfetch.store.job_commands import JobCommands
from rfetch.store.leader_commands import LeaderCommands
from rfetch.store.recovery_commands import RecoveryCommands
from rfetch.store.schedule_commands import ScheduleCommands

__all__ = ["Client", "Commands", "Outcome", "queue_script"]


class Commands(
    JobCommands, RecoveryCommands, ScheduleCommands, AdminCommands, LeaderCommands
):
    """Every Lua script, registered on one Redis client, behind one method each: the
    domain classes combined on one client (no delegation: a call is the domain method).

    Args:
        redis: the client the scripts run on (a method's ``client`` may name a pipeline).
        keys: key names of the namespace.
    """
