"""Jobs for the Sentry worker-process test (``-r sentry_jobs``).

``configure_worker`` initialises sentry-sdk as an application would in its own module, with
``RfetchIntegration``, tracing on, and a transport that appends each envelope item as one JSON
line ``{"type": ..., "payload": ...}`` to the file named by ``RFETCH_TEST_SENTRY_FILE``
(no network).
"""

from __future__ import annotations

import json
import os
from typing import Any

import sentry_sdk
from sentry_sdk.envelope import Envelope
from sentry_sdk.transport import Transport

import rfetch
from rfetch.integrations.sentry import RfetchIntegration


class FileTransport(Transport):
    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def capture_envelope(self, envelope: Envelope) -> None:
        lines = [
            json.dumps({"type": item.type, "payload": item.payload.json}) + "\n"
            for item in envelope.items if item.payload.json is not None
        ]
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, "".join(lines).encode())
        finally:
            os.close(fd)


class TracedJob(rfetch.Job):
    def perform(self, *args: Any) -> None:
        sentry_sdk.capture_message(f"traced job {self.jid}")


def configure_worker(config: rfetch.Config) -> None:
    sentry_sdk.init(
        dsn="http://public@localhost/1",
        transport=FileTransport(os.environ["RFETCH_TEST_SENTRY_FILE"]),
        traces_sample_rate=1.0,
        integrations=[RfetchIntegration()],
        auto_enabling_integrations=False,
    )
