"""Sentry in tests: sentry-sdk's own client with a recording transport (no network).

A plugin (tests/conftest.py): the ``transport`` fixture gives a fresh
:class:`RecordingTransport` and leaves sentry-sdk uninitialised afterwards.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import sentry_sdk
from sentry_sdk.envelope import Envelope
from sentry_sdk.integrations.logging import unignore_logger
from sentry_sdk.transport import Transport

from rfetch.config import Config
from rfetch.integrations.sentry import DUPLICATE_LOGGERS, install

DSN = "http://public@localhost/1"
"""Never contacted: the recording transport replaces HTTP."""


class RecordingTransport(Transport):
    """Keeps every envelope sentry-sdk hands over (sentry-sdk 2.x ``capture_envelope``)."""

    def __init__(self) -> None:
        super().__init__()
        self.envelopes: list[Envelope] = []
        self._lock = threading.Lock()

    def capture_envelope(self, envelope: Envelope) -> None:
        with self._lock:
            self.envelopes.append(envelope)

    def items(self, kind: str) -> list[dict[str, Any]]:
        """The JSON payloads of the items of type ``kind`` (``event``, ``transaction``,
        ``check_in``), in the order sent."""
        with self._lock:
            found = [
                item.payload.json for envelope in self.envelopes for item in envelope.items
                if item.type == kind and item.payload.json is not None
            ]
        return [dict(one) for one in found]

    def events(self) -> list[dict[str, Any]]:
        """The error (and message) events."""
        return self.items("event")

    def transactions(self) -> list[dict[str, Any]]:
        return self.items("transaction")

    def check_ins(self) -> list[dict[str, Any]]:
        return self.items("check_in")


@pytest.fixture
def transport(monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordingTransport]:
    """A fresh recording transport; sentry-sdk is left uninitialised afterwards."""
    monkeypatch.delenv("SENTRY_DSN", raising=False)
    recording = RecordingTransport()
    yield recording
    sentry_sdk.get_client().close()
    sentry_sdk.get_global_scope().set_client(None)
    for name in DUPLICATE_LOGGERS:
        unignore_logger(name)


def start_sentry(config: Config, transport: RecordingTransport, **options: Any) -> None:
    """Initialise sentry-sdk through rfetch's ``install``, sending to ``transport``."""
    # auto_enabling_integrations=False: no patching of redis-py for the rest of the session.
    assert install(
        config, dsn=DSN, transport=transport, auto_enabling_integrations=False, **options
    )
