"""The OpenTelemetry link survives a retry and a push back: every run links to the push.

The worker's parts run in this process against a real redis-server, so the SDK's
in-memory exporter sees the consumer spans.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import rfetch
from rfetch.config import Config
from rfetch.integrations import opentelemetry as otel
from tests.support.gate_worker import Worker, make_due

RUNS: list[str] = []


class FailsOnce(rfetch.Job):
    queue = "q"

    def perform(self, name: str) -> None:
        RUNS.append(name)
        if len(RUNS) == 1:
            raise RuntimeError("first run fails")


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    RUNS.clear()
    yield InMemorySpanExporter()


@pytest.fixture
def worker(config: Config, exporter: InMemorySpanExporter) -> Iterator[Worker]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    traced = config.replace(
        queues=(rfetch.QueueSpec("q"),), client_middleware=[], server_middleware=[]
    )
    otel.install(traced, provider)
    w = Worker(traced, [FailsOnce])
    yield w
    w.redis.close()


def test_retry_and_push_back_keep_the_link(
    worker: Worker, exporter: InMemorySpanExporter, r: redis.Redis
) -> None:
    FailsOnce.set(client=worker.client).perform_async("a")
    [producer] = [s for s in exporter.get_finished_spans() if s.kind is SpanKind.PRODUCER]
    assert producer.context is not None
    pushed = producer.context.span_id

    worker.work_one()  # fails: to the retry set, with the payload's trace context
    make_due(r, "retry")
    assert worker.poller.enqueue_due() == 1
    unit = worker.take()
    worker.fetch.requeue([unit])  # as at TERM: pushed back to the queue as fetched
    worker.work_one()  # the retry succeeds

    consumers = [s for s in exporter.get_finished_spans() if s.kind is SpanKind.CONSUMER]
    assert [s.status.status_code for s in consumers] == [StatusCode.ERROR, StatusCode.UNSET]
    assert [[link.context.span_id for link in s.links] for s in consumers] == [[pushed], [pushed]]
    retry_counts: list[Any] = [
        (s.attributes or {}).get("messaging.rfetch.retry_count") for s in consumers
    ]
    assert retry_counts == [None, 0]
    assert RUNS == ["a", "a"]
