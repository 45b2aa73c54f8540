"""Jobs of the Django test project; a worker loads them with
``-r rfetch.integrations.django.worker -r tests.django_app.jobs``."""

from __future__ import annotations

from django.db import connection

import rfetch
from tests.django_app.models import BackendRun, Signup


class WelcomeSignup(rfetch.Job):
    queue = "django"

    def perform(self, signup_id: int) -> None:
        Signup.objects.filter(pk=signup_id).update(welcomed=True)


class RecordBackend(rfetch.Job):
    """Records the PostgreSQL backend pid of the connection it ran on."""

    queue = "django"

    def perform(self, label: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            (pid,) = cursor.fetchone()
        BackendRun.objects.create(label=label, pid=pid, jid=self.jid)

    def retry_in(self, count: int, exc: BaseException, job: dict[str, object]) -> float:
        return 3600.0  # a failed run stays visible in the retry set
