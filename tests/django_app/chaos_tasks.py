"""A Django task whose worker is SIGKILLed mid-task runs again on another worker and ends
SUCCESSFUL, its two attempts in its TaskResult: reliable fetch under ``django.tasks``.

Not found by the suite's discovery (the name does not start with ``test``): run by the
``slow`` test ``tests/integration/test_django.py::test_a_killed_workers_task_runs_again``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

from django.db import connection
from django.test import TransactionTestCase

from rfetch.integrations.django.apps import app_config
from tests.django_app.models import Signup
from tests.django_app.test_tasks import tasks_api
from tests.django_app.tests import ROOT, redis_client, wait_for

FAST_RECOVERY = {
    "RFETCH_HEARTBEAT_INTERVAL": "1",
    "RFETCH_HEARTBEAT_TTL": "3",
    "RFETCH_ORPHAN_CHECK_INTERVAL": "0.5",
}
"""A dead worker is noticed within seconds (its heartbeat expires after 3 s)."""


class KilledWorkerTests(TransactionTestCase):
    def setUp(self) -> None:
        redis_client().flushdb()
        self.log_path = Path(tempfile.mkdtemp()) / "worker.log"
        self.log: IO[bytes] = self.log_path.open("ab")
        self.workers: list[subprocess.Popen[bytes]] = []

    def tearDown(self) -> None:
        for worker in self.workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
                worker.wait(30)
        self.log.close()

    def start_worker(self) -> subprocess.Popen[bytes]:
        env = {
            **os.environ, **FAST_RECOVERY,
            "DJANGO_SETTINGS_MODULE": "tests.django_app.settings",
            "RFETCH_DJANGO_DB": connection.settings_dict["NAME"],  # the test database
            "REDIS_URL": app_config().config.redis_url,
        }
        worker = subprocess.Popen(
            [sys.executable, "-m", "rfetch.cli", "worker", "-c", "1",
             "-r", "rfetch.integrations.django.worker", "-r", "tests.django_app.tasks"],
            cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT,
        )
        self.workers.append(worker)
        return worker

    def wait(self, condition: Any, what: str) -> None:
        try:
            wait_for(condition, 90, what)
        except AssertionError:
            log = self.log_path.read_text(errors="replace")
            raise AssertionError(f"timed out waiting for {what}; worker log:\n{log}") from None

    def test_a_task_whose_worker_was_killed_runs_again_and_succeeds(self) -> None:
        from tests.django_app import tasks

        status = tasks_api().TaskResultStatus
        first = self.start_worker()
        result = tasks.hold.enqueue("max@example.com")

        def running() -> bool:
            result.refresh()
            return bool(result.status == status.RUNNING)

        self.wait(running, "the task to start")
        first.send_signal(signal.SIGKILL)  # mid-task: no acknowledgement, no record
        first.wait(30)
        Signup.objects.create(email="max@example.com")  # the next attempt finishes
        self.start_worker()

        def finished() -> bool:
            result.refresh()
            return bool(result.is_finished)

        self.wait(finished, "the task to run again")
        self.assertEqual(result.status, status.SUCCESSFUL)
        self.assertEqual(result.return_value, "max@example.com")
        self.assertEqual(result.attempts, 2)  # one attempt per worker
        self.assertEqual(len(set(result.worker_ids)), 2)
        self.assertEqual(result.errors, [])  # a killed attempt raised nothing
