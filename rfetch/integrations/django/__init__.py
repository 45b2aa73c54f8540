"""Django integration (extra ``django``).

- ``INSTALLED_APPS += ["rfetch.integrations.django"]``: ``settings.RFETCH = {...}`` becomes
  the Config of the process-wide client (:mod:`.settings`), and a push inside
  ``transaction.atomic()`` is written when the transaction commits, ``aperform_async`` and
  the other asyncio pushes included (Sidekiq 7's
  transaction-aware client; ``RFETCH["on_commit"] = False`` turns it off, and
  :func:`immediate_client` pushes at once for one call:
  ``Job.set(client=immediate_client()).perform_async(...)``).
- ``path("rfetch/", include("rfetch.integrations.django.urls"))``: the web UI, for staff
  users only (Django's ``staff_member_required``).
- ``rfetch worker -r rfetch.integrations.django.worker -r myapp.jobs``: a worker that sets
  Django up and closes stale database connections around each job (:mod:`.worker`).
- ``TASKS = {"default": {"BACKEND": "rfetch.integrations.django.RfetchBackend"}}``:
  Django's task framework (``django.tasks``, or the ``django-tasks`` package before Django
  6) on rfetch (:mod:`.tasks`), its tasks run by that same worker.

See docs/integrations.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rfetch.integrations.django.apps import app_config
from rfetch.push.client import Client

if TYPE_CHECKING:
    from rfetch.integrations.django.tasks.backend import RfetchBackend


def immediate_client() -> Client:
    """The client that pushes at once, even inside a transaction.

    Raises:
        LookupError: the app is not in ``INSTALLED_APPS``.
    """
    return app_config().immediate_client()


def __getattr__(name: str) -> Any:
    """``RfetchBackend``, imported at first use: Django's task framework is optional."""
    if name == "RfetchBackend":
        from rfetch.integrations.django.tasks.backend import RfetchBackend

        return RfetchBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["RfetchBackend", "immediate_client"]
