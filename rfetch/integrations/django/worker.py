"""Load Django in an ``rfetch worker``: name this module first with ``-r``::

    DJANGO_SETTINGS_MODULE=mysite.settings \\
        rfetch worker -r rfetch.integrations.django.worker -r myapp.jobs

Importing it calls ``django.setup()`` (so the job modules named after it can import
models), and its ``configure_worker`` applies ``settings.RFETCH`` to the worker's Config
(command-line options win, then the settings, then the environment) and puts
:class:`~rfetch.integrations.django.middleware.CloseOldConnections` first in the server
middleware, so every job starts and ends without a stale database connection.
"""

from __future__ import annotations

import os

import django
from django.conf import settings

from rfetch.config import Config
from rfetch.errors import ConfigError


def _setup() -> None:
    if not os.environ.get("DJANGO_SETTINGS_MODULE"):
        raise ConfigError(
            "-r rfetch.integrations.django.worker needs DJANGO_SETTINGS_MODULE "
            "(e.g. DJANGO_SETTINGS_MODULE=mysite.settings)"
        )
    django.setup()


_setup()


def configure_worker(config: Config) -> None:
    """Apply ``settings.RFETCH`` and add the connection middleware (called by
    ``rfetch worker`` after the ``-r`` imports).

    Raises:
        ConfigError: a bad ``settings.RFETCH``.
    """
    from rfetch.integrations.django.middleware import CloseOldConnections
    from rfetch.integrations.django.settings import apply_to_worker

    apply_to_worker(config, getattr(settings, "RFETCH", {}))
    if not any(isinstance(m, CloseOldConnections) for m in config.server_middleware):
        config.server_middleware.insert(0, CloseOldConnections())
