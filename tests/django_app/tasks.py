"""Django tasks (``@task``) of the test project, run by RfetchBackend; a worker loads them
with ``-r rfetch.integrations.django.worker -r tests.django_app.tasks``."""

from __future__ import annotations

import asyncio
import time
from typing import Any

try:
    from django.tasks import TaskContext, task
except ImportError:  # Django before 6.0: the django-tasks package
    from django_tasks import TaskContext, task

from tests.django_app.models import Signup


@task(queue_name="django")
def welcome(signup_id: int) -> str:
    """Marks the signup welcomed; returns its email."""
    signup = Signup.objects.get(pk=signup_id)
    signup.welcomed = True
    signup.save(update_fields=["welcomed"])
    return signup.email


@task(queue_name="django")
def explode(message: str) -> None:
    raise ValueError(message)


@task(queue_name="django", takes_context=True)
def attempt_of(context: TaskContext, label: str) -> dict[str, Any]:
    return {"label": label, "attempt": context.attempt, "id": context.task_result.id}


@task(queue_name="django")
async def add_later(a: int, b: int) -> int:
    await asyncio.sleep(0)
    return a + b


@task(queue_name="django")
def hold(email: str) -> str:
    """Runs until a signup of ``email`` exists (at most a minute): a task seen running."""
    deadline = time.monotonic() + 60
    while not Signup.objects.filter(email=email).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no signup {email!r} within a minute")
        time.sleep(0.05)
    return email
