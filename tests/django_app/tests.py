"""The Django integration, run by Django's test runner against PostgreSQL and a real Redis
(``tests/integration/test_django.py`` starts it with the Redis of the pytest session)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from unittest import mock

import redis
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.test import TestCase, TransactionTestCase

import rfetch
from rfetch import testing
from rfetch.integrations.django import immediate_client
from rfetch.integrations.django.apps import app_config
from tests.django_app.jobs import RecordBackend, WelcomeSignup
from tests.django_app.models import BackendRun, Signup
from tests.support.wait import wait_for

ROOT = Path(__file__).resolve().parents[2]


def redis_client() -> redis.Redis:
    return redis.Redis.from_url(app_config().config.redis_url)


def queued_jids(r: redis.Redis) -> list[str]:
    return [json.loads(raw)["jid"] for raw in r.lrange("queue:django", 0, -1)]


class OnCommitTests(TransactionTestCase):
    """Pushes inside transaction.atomic() wait for the commit (real commits here)."""

    def setUp(self) -> None:
        self.redis = redis_client()
        self.redis.flushdb()

    def tearDown(self) -> None:
        self.redis.close()

    def test_a_push_inside_a_transaction_is_written_at_commit(self) -> None:
        with transaction.atomic():
            signup = Signup.objects.create(email="ann@example.com")
            jid = WelcomeSignup.perform_async(signup.pk)
            self.assertIsNotNone(jid)
            self.assertEqual(queued_jids(self.redis), [])  # not before the row is visible
        self.assertEqual(queued_jids(self.redis), [jid])

    def test_a_rolled_back_transaction_pushes_nothing(self) -> None:
        try:
            with transaction.atomic():
                signup = Signup.objects.create(email="bob@example.com")
                WelcomeSignup.perform_async(signup.pk)
                raise RuntimeError("rolled back")
        except RuntimeError:
            pass
        self.assertEqual(queued_jids(self.redis), [])
        self.assertEqual(Signup.objects.count(), 0)

    def test_a_rolled_back_savepoint_drops_only_its_pushes(self) -> None:
        with transaction.atomic():
            kept = WelcomeSignup.perform_async(1)
            try:
                with transaction.atomic():
                    WelcomeSignup.perform_async(2)
                    raise RuntimeError("inner block rolled back")
            except RuntimeError:
                pass
        self.assertEqual(queued_jids(self.redis), [kept])

    def test_the_immediate_client_pushes_inside_a_transaction(self) -> None:
        with transaction.atomic():
            jid = WelcomeSignup.set(client=immediate_client()).perform_async(3)
            self.assertEqual(queued_jids(self.redis), [jid])

    def test_outside_a_transaction_a_push_is_written_at_once(self) -> None:
        jid = WelcomeSignup.perform_async(4)
        self.assertEqual(queued_jids(self.redis), [jid])

    def test_bad_arguments_raise_at_the_call_not_at_commit(self) -> None:
        with transaction.atomic(), self.assertRaises(rfetch.ArgsNotSerializable):
            WelcomeSignup.perform_async(object())  # type: ignore[arg-type]
        self.assertEqual(queued_jids(self.redis), [])


class AsyncOnCommitTests(TransactionTestCase):
    """``aperform_async`` and friends inside transaction.atomic() wait for the commit too.

    Django's atomic() is synchronous: asyncio pushes reach it through ``async_to_sync`` from
    the block's thread, whether the block is plain sync code or an async view's
    ``sync_to_async`` call."""

    def setUp(self) -> None:
        self.redis = redis_client()
        self.redis.flushdb()

    def tearDown(self) -> None:
        self.redis.close()

    def test_an_async_push_inside_a_transaction_is_written_at_commit(self) -> None:
        with transaction.atomic():
            jid = async_to_sync(WelcomeSignup.aperform_async)(5)
            self.assertIsNotNone(jid)
            self.assertEqual(queued_jids(self.redis), [])
        self.assertEqual(queued_jids(self.redis), [jid])

    def test_a_rolled_back_transaction_drops_async_pushes(self) -> None:
        try:
            with transaction.atomic():
                async_to_sync(WelcomeSignup.aperform_async)(6)
                async_to_sync(WelcomeSignup.aperform_in)(60, 7)
                async_to_sync(WelcomeSignup.aperform_bulk)([[8], [9]])
                raise RuntimeError("rolled back")
        except RuntimeError:
            pass
        self.assertEqual(queued_jids(self.redis), [])
        self.assertEqual(self.redis.zcard("schedule"), 0)

    def test_an_async_views_atomic_block_defers_and_drops_with_it(self) -> None:
        queued_at_push: list[list[str]] = []

        @transaction.atomic
        def signup(email: str, fail: bool) -> str | None:
            row = Signup.objects.create(email=email)
            jid = async_to_sync(WelcomeSignup.aperform_async)(row.pk)
            queued_at_push.append(queued_jids(self.redis))
            if fail:
                raise RuntimeError("rolled back")
            return jid

        async def view() -> str | None:
            with contextlib.suppress(RuntimeError):
                await sync_to_async(signup)("dan@example.com", True)
            return await sync_to_async(signup)("eve@example.com", False)

        jid = async_to_sync(view)()
        self.assertEqual(queued_at_push, [[], []])
        self.assertEqual(queued_jids(self.redis), [jid])

    def test_outside_a_transaction_an_async_push_is_written_at_once(self) -> None:
        jid = async_to_sync(WelcomeSignup.aperform_async)(10)
        self.assertEqual(queued_jids(self.redis), [jid])


class FakeModeOnCommitTests(TransactionTestCase):
    """rfetch.testing's fake mode keeps the on-commit behaviour: a push inside a
    transaction reaches the fake queues at commit, never on rollback; nothing reaches
    Redis, not even through the immediate client."""

    def setUp(self) -> None:
        self.redis = redis_client()
        self.redis.flushdb()

    def tearDown(self) -> None:
        self.assertEqual(queued_jids(self.redis), [])  # nothing ever reached Redis
        self.redis.close()

    def test_a_push_is_recorded_at_commit(self) -> None:
        with testing.fake() as queues:
            with transaction.atomic():
                signup = Signup.objects.create(email="fay@example.com")
                WelcomeSignup.perform_async(signup.pk)
                self.assertEqual(queues.jobs(), [])  # not before the row is visible
            queues.assert_enqueued(WelcomeSignup, args=[signup.pk], queue="django")
            self.assertEqual(queues.drain(), 1)
        self.assertTrue(Signup.objects.get(pk=signup.pk).welcomed)

    def test_a_rolled_back_transaction_records_nothing(self) -> None:
        with testing.fake() as queues:
            try:
                with transaction.atomic():
                    signup = Signup.objects.create(email="gus@example.com")
                    WelcomeSignup.perform_async(signup.pk)
                    raise RuntimeError("rolled back")
            except RuntimeError:
                pass
            self.assertEqual(queues.jobs(), [])

    def test_the_immediate_client_is_intercepted_too(self) -> None:
        with testing.fake() as queues, transaction.atomic():
            jid = WelcomeSignup.set(client=immediate_client()).perform_async(5)
            self.assertEqual([j["jid"] for j in queues.jobs()], [jid])


class FakeModeInTestCaseTests(TestCase):
    """In a TestCase (each test inside a transaction that never commits), on-commit pushes
    run when the test captures the on-commit callbacks: Celery's pattern."""

    def test_captured_on_commit_callbacks_record_the_push(self) -> None:
        with testing.fake() as queues:
            with self.captureOnCommitCallbacks(execute=True):
                WelcomeSignup.perform_async(6)
                self.assertEqual(queues.jobs(), [])
            queues.assert_enqueued(WelcomeSignup, args=[6], count=1)


class QuerysetEnumeratorTests(TestCase):
    """An iterable job's queryset walk (``rfetch.durable.enumerators``): by primary key in
    batches, resuming after the cursor."""

    def test_a_queryset_is_walked_by_pk_in_batches_from_the_cursor(self) -> None:
        from rfetch.durable.enumerators import queryset_enumerator

        rows = [Signup.objects.create(email=f"u{i}@example.com") for i in range(5)]
        walk = list(queryset_enumerator(Signup.objects.all(), cursor=None, batch_size=2))
        self.assertEqual([c for _, c in walk], [r.pk for r in rows])
        resumed = queryset_enumerator(Signup.objects.filter(welcomed=False),
                                      cursor=rows[2].pk, batch_size=2)
        self.assertEqual([row.email for row, _ in resumed], ["u3@example.com",
                                                              "u4@example.com"])


class WorkerTests(TransactionTestCase):
    """A real ``rfetch worker`` with Django loaded: jobs use the ORM, and a database
    connection the server closed costs no job."""

    def setUp(self) -> None:
        self.redis = redis_client()
        self.redis.flushdb()
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.django_app.settings",
            "RFETCH_DJANGO_DB": connection.settings_dict["NAME"],  # the test database
            "REDIS_URL": app_config().config.redis_url,
        }
        self.log_path = Path(tempfile.mkdtemp()) / "worker.log"
        self.log = self.log_path.open("ab")
        self.worker = subprocess.Popen(
            [sys.executable, "-m", "rfetch.cli", "worker", "-c", "1",
             "-r", "rfetch.integrations.django.worker", "-r", "tests.django_app.jobs"],
            cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT,
        )

    def tearDown(self) -> None:
        self.worker.send_signal(signal.SIGTERM)
        self.assertEqual(self.worker.wait(30), 0)
        self.log.close()
        self.redis.close()

    def ran(self, label: str) -> BackendRun:
        try:
            wait_for(lambda: BackendRun.objects.filter(label=label).exists(), 30, label)
        except AssertionError:
            log = self.log_path.read_text(errors="replace")
            raise AssertionError(f"job {label!r} did not run; worker log:\n{log}") from None
        return BackendRun.objects.get(label=label)

    def test_jobs_use_the_orm(self) -> None:
        signup = Signup.objects.create(email="cy@example.com")
        WelcomeSignup.perform_async(signup.pk)
        wait_for(lambda: Signup.objects.get(pk=signup.pk).welcomed, 30, "the welcome job")
        # The documented command warns about neither -r (the first is a setup module).
        log = self.log_path.read_text(errors="replace")
        self.assertIn("job classes:", log)
        self.assertNotIn("adds no job class", log)

    def test_a_connection_closed_by_the_server_costs_no_job(self) -> None:
        RecordBackend.perform_async("first")
        first = self.ran("first")
        with connection.cursor() as cursor:  # as a database restart or failover would
            cursor.execute("SELECT pg_terminate_backend(%s)", [first.pid])
        wait_for(lambda: not self.backend_alive(first.pid), 10, "the backend to exit")

        RecordBackend.perform_async("second")
        second = self.ran("second")
        self.assertNotEqual(second.pid, first.pid)  # a new connection ...
        self.assertEqual(self.redis.zcard("retry"), 0)  # ... and no failed run
        self.assertEqual(BackendRun.objects.filter(label="second").count(), 1)

    def backend_alive(self, pid: int) -> bool:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid])
            (count,) = cursor.fetchone()
        return bool(count)


class WebUITests(TestCase):
    """The web UI under /rfetch/, for staff users only."""

    def setUp(self) -> None:
        self.redis = redis_client()
        self.redis.flushdb()

    def tearDown(self) -> None:
        self.redis.close()

    def test_anonymous_visitors_go_to_the_login_page(self) -> None:
        response = self.client.get("/rfetch/queues")
        self.assertEqual(response.status_code, 302)
        self.assertEqual(response["Location"], "/admin/login/?next=/rfetch/queues")

    def test_users_who_are_not_staff_are_refused(self) -> None:
        self.client.force_login(User.objects.create_user("dee", password="x"))
        self.assertEqual(self.client.get("/rfetch/").status_code, 302)

    def test_staff_see_the_ui_under_the_mount_and_can_act(self) -> None:
        self.client.force_login(User.objects.create_user("eve", password="x", is_staff=True))
        response = self.client.get("/rfetch/")
        self.assertEqual(response.status_code, 200)
        body = response.content.decode()
        self.assertIn('href="/rfetch/queues"', body)
        self.assertIn("Jobs", body)  # RFETCH["web"]["title"]
        self.assertEqual(self.client.get("/rfetch/static/rfetch.css").status_code, 200)

        self.redis.sadd("queues", "django")
        page = self.client.get("/rfetch/queues")
        self.assertEqual(page.status_code, 200)
        cookie = self.client.cookies["rfetch_csrf"]  # set by rfetch, through the view
        self.assertEqual(cookie["path"], "/rfetch")
        found = re.search(r'name="csrf-token" content="([^"]+)"', page.content.decode())
        assert found is not None
        token = found.group(1)
        refused = self.client.post("/rfetch/queues/django", {"action": "pause"})
        self.assertEqual(refused.status_code, 403)  # rfetch's own CSRF check
        for forged in ({"csrf_token": cookie.value}, {"csrf_token": token}):
            # the cookie's value is no token; another port of the host is another origin
            refused = self.client.post(
                "/rfetch/queues/django", {"action": "pause", **forged},
                headers={"Origin": "http://testserver:8000"},
            )
            self.assertEqual(refused.status_code, 403)
        self.assertFalse(self.redis.sismember("paused", "django"))
        response = self.client.post(
            "/rfetch/queues/django", {"action": "pause", "csrf_token": token},
            headers={"Origin": "http://testserver", "Sec-Fetch-Site": "same-origin"},
        )
        self.assertEqual(response.status_code, 303)
        self.assertEqual(response["Location"], "/rfetch/queues/django")
        self.assertTrue(self.redis.sismember("paused", "django"))

    def test_metrics_answer_a_scraper_without_a_session(self) -> None:
        # Prometheus has no Django session: /metrics is not behind the staff login.
        self.redis.sadd("queues", "django")
        response = self.client.get("/rfetch/metrics")
        self.assertEqual(response.status_code, 200)
        self.assertIn('rfetch_queue_jobs{queue="django"} 0.0', response.content.decode())
        self.assertEqual(self.client.post("/rfetch/metrics").status_code, 302)  # GET only

    def test_metrics_token_requires_a_bearer_header(self) -> None:
        options = dataclasses.replace(
            app_config().options, web={**app_config().options.web, "metrics_token": "s3cret"}
        )
        with mock.patch.object(app_config(), "options", options):
            self.assertEqual(self.client.get("/rfetch/metrics").status_code, 401)
            wrong = self.client.get("/rfetch/metrics", HTTP_AUTHORIZATION="Bearer nope")
            self.assertEqual(wrong.status_code, 401)
            right = self.client.get("/rfetch/metrics", HTTP_AUTHORIZATION="Bearer s3cret")
            self.assertEqual(right.status_code, 200)
            # The pages stay behind the staff login, token or not.
            page = self.client.get("/rfetch/queues", HTTP_AUTHORIZATION="Bearer s3cret")
            self.assertEqual(page.status_code, 302)
