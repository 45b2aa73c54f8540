"""A task no test worker imports (its module is not given with -r): a worker must refuse it
rather than import it from what the payload names."""

from __future__ import annotations

try:
    from django.tasks import task
except ImportError:  # Django before 6.0: the django-tasks package
    from django_tasks import task


@task(queue_name="django")
def stray() -> str:
    return "ran"
