"""Django's task framework (``django.tasks``, or the ``django-tasks`` package before Django
6) on rfetch's ``RfetchBackend``, run by Django's test runner against PostgreSQL and a real
Redis with the rest of the integration's tests (tests.py)."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from asgiref.sync import async_to_sync
from django.db import connection, transaction
from django.test import TransactionTestCase
from django.utils import timezone

from rfetch.integrations.django.apps import app_config
from tests.django_app.models import Signup
from tests.django_app.tests import ROOT, queued_jids, redis_client, wait_for


def tasks_api() -> Any:
    """Django's task framework: django.tasks (Django 6+) or the django-tasks package."""
    try:
        import django.tasks as api
    except ImportError:
        import django_tasks as api
    return api


def tasks_exceptions() -> Any:
    try:
        import django.tasks.exceptions as exceptions
    except ImportError:
        import django_tasks.exceptions as exceptions
    return exceptions


class DjangoTaskEnqueueTests(TransactionTestCase):
    """RfetchBackend's enqueue, with no worker: on commit, rolled back, run_after."""

    def setUp(self) -> None:
        from tests.django_app import tasks

        self.tasks = tasks
        self.redis = redis_client()
        self.redis.flushdb()

    def tearDown(self) -> None:
        self.redis.close()

    def test_a_rolled_back_enqueue_pushes_nothing(self) -> None:
        with contextlib.suppress(RuntimeError), transaction.atomic():
            signup = Signup.objects.create(email="ida@example.com")
            result = self.tasks.welcome.enqueue(signup.pk)
            async_to_sync(self.tasks.add_later.aenqueue)(1, 2)
            raise RuntimeError("rolled back")
        self.assertEqual(self.redis.keys("*"), [])  # nothing at all reached Redis
        with self.assertRaises(tasks_exceptions().TaskResultDoesNotExist):
            self.tasks.welcome.get_result(result.id)

    def test_an_enqueue_inside_a_transaction_is_pushed_at_commit(self) -> None:
        with transaction.atomic():
            signup = Signup.objects.create(email="jo@example.com")
            result = self.tasks.welcome.enqueue(signup.pk)
            self.assertEqual(queued_jids(self.redis), [])  # not before the row is visible
        self.assertEqual(queued_jids(self.redis), [result.id])
        found = self.tasks.welcome.get_result(result.id)  # from its payload in the queue
        self.assertEqual(found.status, tasks_api().TaskResultStatus.READY)
        self.assertEqual(found.args, [signup.pk])

    def test_run_after_puts_the_task_in_the_scheduled_set(self) -> None:
        at = timezone.now() + dt.timedelta(hours=1)
        result = self.tasks.welcome.using(run_after=at).enqueue(7)
        self.assertEqual(queued_jids(self.redis), [])
        scheduled = self.redis.zrange("schedule", 0, -1, withscores=True)
        self.assertEqual([json.loads(raw)["jid"] for raw, _ in scheduled], [result.id])
        self.assertAlmostEqual(scheduled[0][1], at.timestamp(), delta=1)
        found = self.tasks.welcome.get_result(result.id)
        self.assertEqual(found.status, tasks_api().TaskResultStatus.READY)
        self.assertEqual(found.args, [7])

    def test_a_tasks_priority_is_its_jobs_priority_inside_the_queue(self) -> None:
        self.assertTrue(self.tasks.welcome.get_backend().supports_priority)
        plain = self.tasks.welcome.enqueue(1)
        urgent = self.tasks.welcome.using(priority=10).enqueue(2)
        later = self.tasks.welcome.using(priority=-10).enqueue(3)
        self.assertEqual(queued_jids(self.redis), [plain.id])  # priority 0: the list
        waiting = [json.loads(raw) for raw in self.redis.zrange("rfetch:prio:django", 0, -1)]
        self.assertEqual([(j["jid"], j["priority"]) for j in waiting],
                         [(urgent.id, 10), (later.id, -10)])
        found = self.tasks.welcome.get_result(urgent.id)  # explain finds it in the set
        self.assertEqual(found.status, tasks_api().TaskResultStatus.READY)


class DjangoTaskWorkerTests(TransactionTestCase):
    """A ``django.tasks`` task end to end: enqueued through Django's API, run by a real
    ``rfetch worker -r rfetch.integrations.django.worker -r tests.django_app.tasks`` on
    PostgreSQL, its TaskResult read back through Django's API."""

    worker: subprocess.Popen[bytes]

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        redis_client().flushdb()
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.django_app.settings",
            "RFETCH_DJANGO_DB": connection.settings_dict["NAME"],  # the test database
            "REDIS_URL": app_config().config.redis_url,
        }
        cls.log_path = Path(tempfile.mkdtemp()) / "worker.log"
        cls.log = cls.log_path.open("ab")
        cls.worker = subprocess.Popen(
            [sys.executable, "-m", "rfetch.cli", "worker", "-c", "2",
             "-r", "rfetch.integrations.django.worker", "-r", "tests.django_app.tasks"],
            cwd=ROOT, env=env, stdout=cls.log, stderr=subprocess.STDOUT,
        )

    @classmethod
    def tearDownClass(cls) -> None:
        cls.worker.send_signal(signal.SIGTERM)
        code = cls.worker.wait(30)
        cls.log.close()
        super().tearDownClass()
        assert code == 0, cls.log_path.read_text(errors="replace")

    def setUp(self) -> None:
        from tests.django_app import tasks

        self.tasks = tasks
        self.redis = redis_client()
        self.status = tasks_api().TaskResultStatus

    def tearDown(self) -> None:
        self.redis.close()

    def finished(self, result: Any) -> Any:
        def done() -> bool:
            result.refresh()  # Django's API: get_result of the backend, from Redis
            return bool(result.is_finished)

        try:
            wait_for(done, 60, f"task {result.id}")
        except AssertionError:
            log = self.log_path.read_text(errors="replace")
            raise AssertionError(f"task {result.id} did not finish; worker log:\n{log}") from None
        return result

    def test_a_task_runs_and_its_result_is_read_through_djangos_api(self) -> None:
        signup = Signup.objects.create(email="kim@example.com")
        result = self.tasks.welcome.enqueue(signup.pk)
        self.assertEqual(result.status, self.status.READY)
        self.finished(result)
        self.assertEqual(result.status, self.status.SUCCESSFUL)
        self.assertEqual(result.return_value, "kim@example.com")
        self.assertTrue(Signup.objects.get(pk=signup.pk).welcomed)  # the ORM, on PostgreSQL

        again = self.tasks.welcome.get_result(result.id)  # a fresh read, by id
        self.assertEqual(again.status, self.status.SUCCESSFUL)
        self.assertEqual(again.return_value, "kim@example.com")
        self.assertEqual(again.args, [signup.pk])
        self.assertEqual(again.errors, [])
        self.assertEqual(again.attempts, 1)
        assert again.started_at is not None and again.finished_at is not None
        assert again.enqueued_at is not None
        self.assertLessEqual(again.enqueued_at, again.started_at)
        self.assertLessEqual(again.started_at, again.finished_at)
        with self.assertRaises(tasks_exceptions().TaskResultMismatch):
            self.tasks.explode.get_result(result.id)

    def test_a_failing_task_is_failed_with_its_error(self) -> None:
        result = self.finished(self.tasks.explode.enqueue("boom"))
        self.assertEqual(result.status, self.status.FAILED)
        with self.assertRaises(ValueError):
            result.return_value  # noqa: B018  Django's API raises for a failed task
        [error] = result.errors
        self.assertIs(error.exception_class, ValueError)
        self.assertIn("ValueError: boom", error.traceback)
        self.assertIn("explode", error.traceback)  # the task's own frame
        dead = [json.loads(raw)["jid"] for raw in self.redis.zrange("dead", 0, -1)]
        self.assertIn(result.id, dead)  # rfetch's dead set: retry it from the web UI

    def test_context_and_async_tasks(self) -> None:
        with_context = self.finished(self.tasks.attempt_of.enqueue("ctx"))
        self.assertEqual(with_context.status, self.status.SUCCESSFUL)
        self.assertEqual(with_context.return_value,
                         {"label": "ctx", "attempt": 1, "id": with_context.id})
        added = self.finished(async_to_sync(self.tasks.add_later.aenqueue)(2, 3))
        self.assertEqual(added.status, self.status.SUCCESSFUL)
        self.assertEqual(added.return_value, 5)

    def test_a_task_the_worker_did_not_import_is_refused_not_imported(self) -> None:
        from tests.django_app.stray_tasks import stray

        result = self.finished(stray.enqueue())
        self.assertEqual(result.status, self.status.FAILED)
        [error] = result.errors
        self.assertEqual(error.exception_class_path,
                         "rfetch.integrations.django.tasks.runner.UnknownTask")
        self.assertIn("add its module with -r", error.traceback)

    def test_a_running_task_is_running(self) -> None:
        result = self.tasks.hold.enqueue("lee@example.com")

        def running() -> bool:
            result.refresh()
            return bool(result.status == self.status.RUNNING)

        wait_for(running, 60, "the task to start")
        self.assertEqual(result.attempts, 1)
        self.assertIsNotNone(result.started_at)
        self.assertIsNone(result.finished_at)
        Signup.objects.create(email="lee@example.com")  # lets it finish
        self.finished(result)
        self.assertEqual(result.status, self.status.SUCCESSFUL)
        self.assertEqual(result.return_value, "lee@example.com")
