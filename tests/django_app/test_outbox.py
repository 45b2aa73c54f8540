"""RFETCH["outbox"] under Django's test runner, against PostgreSQL and a real Redis
(``tests/integration/test_django.py`` runs it with the rest of ``tests/django_app``)."""

from __future__ import annotations

import contextlib

from django.db import connection, transaction
from django.test import TransactionTestCase

from rfetch.integrations.django.apps import app_config
from rfetch.integrations.django.outbox import OutboxSink
from rfetch.outbox.service import build_relay
from rfetch.push.client import DEFAULT, Client
from tests.django_app.jobs import WelcomeSignup
from tests.django_app.models import Signup
from tests.django_app.tests import queued_jids, redis_client


class OutboxTests(TransactionTestCase):
    """RFETCH["outbox"]: pushes are rows of rfetch_outbox in the transaction (the table comes
    from the integration's migration), relayed to Redis by the relay."""

    def setUp(self) -> None:
        self.redis = redis_client()
        self.redis.flushdb()
        self.client = Client(app_config().config, sink=OutboxSink("default"))
        self.previous = DEFAULT.swap(self.client)
        with connection.cursor() as cursor:  # not a model's: the test flush leaves it
            cursor.execute("DELETE FROM rfetch_outbox")

    def tearDown(self) -> None:
        DEFAULT.swap(self.previous)
        self.redis.close()

    def outbox_jids(self) -> list[str]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT jid FROM rfetch_outbox ORDER BY id")
            return [row[0] for row in cursor.fetchall()]

    def test_a_push_is_a_row_of_the_transaction_and_the_relay_moves_it(self) -> None:
        with transaction.atomic():
            signup = Signup.objects.create(email="ann@example.com")
            jid = WelcomeSignup.perform_async(signup.pk)
        self.assertEqual(queued_jids(self.redis), [])
        self.assertEqual(self.outbox_jids(), [jid])
        url = f"postgresql://postgres@127.0.0.1:5432/{connection.settings_dict['NAME']}"
        relay = build_relay(app_config().config, url)
        self.assertEqual(relay.relay_batch(), 1)
        self.assertEqual(queued_jids(self.redis), [jid])
        self.assertEqual(self.outbox_jids(), [])

    def test_a_rollback_or_a_rolled_back_savepoint_leaves_no_row(self) -> None:
        with contextlib.suppress(RuntimeError), transaction.atomic():
            WelcomeSignup.perform_async(1)
            raise RuntimeError("rolled back")
        with transaction.atomic():
            kept = WelcomeSignup.perform_async(2)
            with contextlib.suppress(RuntimeError), transaction.atomic():
                WelcomeSignup.perform_async(3)
                raise RuntimeError("savepoint rolled back")
        self.assertEqual(self.outbox_jids(), [kept])

    def test_outside_a_transaction_the_row_commits_at_once(self) -> None:
        jid = WelcomeSignup.perform_async(4)
        self.assertEqual(self.outbox_jids(), [jid])
        self.assertEqual(queued_jids(self.redis), [])
