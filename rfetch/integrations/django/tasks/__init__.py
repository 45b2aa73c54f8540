"""Django's task framework on rfetch: :class:`~.backend.RfetchBackend` (the ``TASKS``
backend), the worker's :class:`~.runner.RunTask` and :class:`~.runner.TaskRunner`, and the
results read back (:mod:`.results`). Needs ``django.tasks`` (Django 6.0+) or the
``django-tasks`` package (:mod:`.compat`). See docs/integrations.md."""
