"""The one place that knows where Django's task framework lives: ``django.tasks`` (Django
6.0+) or, before it, the ``django-tasks`` backport package (``django_tasks``, 0.12+: the API
that became ``django.tasks``). Every other module of the backend imports from here.

The type checker reads the backport (the package the development environment installs);
at run time ``django.tasks`` wins when Django has it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django_tasks import (
        DEFAULT_TASK_QUEUE_NAME,
        TaskContext,
        TaskResult,
        TaskResultStatus,
        task_backends,
    )
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import DEFAULT_TASK_PRIORITY, Task, TaskError
    from django_tasks.exceptions import InvalidTaskError as InvalidTask
    from django_tasks.exceptions import TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued, task_finished, task_started
else:
    try:
        from django.tasks import (
            DEFAULT_TASK_QUEUE_NAME,
            Task,
            TaskContext,
            TaskResult,
            TaskResultStatus,
            task_backends,
        )
        from django.tasks.backends.base import BaseTaskBackend
        from django.tasks.base import DEFAULT_TASK_PRIORITY, TaskError
        from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
        from django.tasks.signals import task_enqueued, task_finished, task_started
    except ImportError:
        try:
            from django_tasks import (
                DEFAULT_TASK_QUEUE_NAME,
                TaskContext,
                TaskResult,
                TaskResultStatus,
                task_backends,
            )
            from django_tasks.backends.base import BaseTaskBackend
            from django_tasks.base import DEFAULT_TASK_PRIORITY, Task, TaskError
            from django_tasks.exceptions import InvalidTaskError as InvalidTask
            from django_tasks.exceptions import TaskResultDoesNotExist
            from django_tasks.signals import task_enqueued, task_finished, task_started
        except ImportError as exc:
            raise ImportError(
                "rfetch's Django task backend needs django.tasks (Django 6.0+) or the "
                "django-tasks package (pip install 'rfetch[django]')"
            ) from exc

# The statuses, typed as members (the enum's tuple values confuse type checkers that run
# without django-stubs' plugin).
READY = TaskResultStatus("READY")
RUNNING = TaskResultStatus("RUNNING")
SUCCESSFUL = TaskResultStatus("SUCCESSFUL")
FAILED = TaskResultStatus("FAILED")

__all__ = [
    "DEFAULT_TASK_PRIORITY",
    "DEFAULT_TASK_QUEUE_NAME",
    "FAILED",
    "READY",
    "RUNNING",
    "SUCCESSFUL",
    "BaseTaskBackend",
    "InvalidTask",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]
