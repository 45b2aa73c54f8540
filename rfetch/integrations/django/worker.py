"""Load Django in an ``rfetch worker``: name this module first with ``-r``::

    DJANGO_SETTINGS_MODULE=mysite.settings \\
        rfetch worker -r rfetch.integrations.django.worker -r myapp.jobs

Importing it calls ``django.setup()`` (so the job modules named after it can import
models), and its ``configure_worker`` applies ``settings.RFETCH`` to the worker's Config
(command-line options win, then the settings, then the environment) and puts
:class:`~rfetch.integrations.django.middleware.CloseOldConnections` first in the server
middleware, so every job starts and ends without a stale database connection.

Where Django's task framework is installed (``django.tasks``, or the ``django-tasks``
package), the worker also runs the tasks of ``RfetchBackend``: importing this module
registers their job class, and ``configure_worker`` adds the middleware that runs them,
with the ``@task`` functions defined by the ``-r`` modules as its allow-list
(:mod:`rfetch.integrations.django.tasks.runner`). Name the task modules with ``-r`` and
their queues with ``-q``.
"""

from __future__ import annotations

import os

import django
from django.conf import settings

from rfetch.config import Config
from rfetch.errors import ConfigError
from rfetch.integrations.django.middleware import CloseOldConnections
from rfetch.integrations.django.settings import apply_to_worker
from rfetch.store.connection import connect
from rfetch.store.keys import Keys


def _setup() -> None:
    if not os.environ.get("DJANGO_SETTINGS_MODULE"):
        raise ConfigError(
            "-r rfetch.integrations.django.worker needs DJANGO_SETTINGS_MODULE "
            "(e.g. DJANGO_SETTINGS_MODULE=mysite.settings)"
        )
    django.setup()


_setup()


def _tasks_available() -> bool:
    try:
        import rfetch.integrations.django.tasks.runner  # noqa: F401  registers RunTask
    except ImportError:
        return False
    return True


TASKS = _tasks_available()
"""Whether Django's task framework is installed (the worker then runs its tasks)."""


def configure_worker(config: Config) -> None:
    """Apply ``settings.RFETCH`` and add the connection middleware (called by
    ``rfetch worker`` after the ``-r`` imports).

    Raises:
        ConfigError: a bad ``settings.RFETCH``.
    """
    apply_to_worker(config, getattr(settings, "RFETCH", {}))
    if not any(isinstance(m, CloseOldConnections) for m in config.server_middleware):
        config.server_middleware.insert(0, CloseOldConnections())
    if TASKS:
        _add_task_runner(config)


def _add_task_runner(config: Config) -> None:
    """The middleware that runs Django tasks, after the connection middleware; its
    allow-list is every ``@task`` the ``-r`` modules defined (they are all imported when
    ``configure_worker`` runs)."""
    from rfetch.integrations.django.tasks.runner import TaskRegistry, TaskRunner
    from rfetch.integrations.django.tasks.runs import TaskRuns

    if any(isinstance(m, TaskRunner) for m in config.server_middleware):
        return
    runs = TaskRuns(connect(config), Keys(config.namespace))
    config.server_middleware.append(TaskRunner(TaskRegistry.from_loaded(), runs))
