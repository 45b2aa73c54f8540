"""OpenTelemetry middleware, checked with the SDK's in-memory exporter (no Redis: the jobs
go through rfetch.testing's fake mode, which runs the same client and server chains)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from opentelemetry import baggage, trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import rfetch
from rfetch import testing
from rfetch.config import Config
from rfetch.integrations import opentelemetry as otel
from rfetch.push.buffer import BufferedJob

seen: list[dict[str, object]] = []


class Traced(rfetch.Job):
    queue = "mail"

    def perform(self, user_id: int) -> None:
        span = trace.get_current_span()
        seen.append({
            "span": span.get_span_context().span_id,
            "user": baggage.get_baggage("user.id"),
        })
        if user_id < 0:
            raise ValueError("negative user")


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    seen.clear()
    memory = InMemorySpanExporter()
    yield memory
    memory.clear()


def traced_config(
    exporter: InMemorySpanExporter, propagation: otel.Propagation = "link", events: bool = False
) -> tuple[Config, TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    config = Config()
    otel.install(config, provider, propagation, events=events)
    otel.install(config, provider, propagation)  # a second call adds nothing
    return config, provider


def spans(exporter: InMemorySpanExporter, kind: SpanKind) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.kind is kind]


def test_producer_context_goes_into_the_payload_and_the_consumer_links_to_it(
    exporter: InMemorySpanExporter,
) -> None:
    config, provider = traced_config(exporter, events=True)
    assert len(config.client_middleware) == 1 and len(config.server_middleware) == 1
    app = provider.get_tracer("app")
    with testing.fake(config) as queues:
        with app.start_as_current_span("signup") as request:
            jid = Traced.perform_async(42)
        [payload] = queues.jobs()
        [producer] = spans(exporter, SpanKind.PRODUCER)
        context = producer.get_span_context()
        assert context is not None and producer.parent is not None
        assert producer.parent.span_id == request.get_span_context().span_id
        assert payload["traceparent"].startswith(
            f"00-{context.trace_id:032x}-{context.span_id:016x}-"
        )
        assert producer.name == "send mail"
        assert producer.attributes == {
            "messaging.system": "rfetch",
            "messaging.operation.type": "send",
            "messaging.operation.name": "send",
            "messaging.destination.name": "mail",
            "messaging.message.id": jid,
            "messaging.rfetch.job.class": Traced.job_name(),
        }
        queues.drain()

    [consumer] = spans(exporter, SpanKind.CONSUMER)
    consumer_context = consumer.get_span_context()
    assert consumer_context is not None
    assert consumer.name == "process mail"
    assert consumer.parent is None  # a trace of its own ...
    assert consumer_context.trace_id != context.trace_id
    assert [link.context.span_id for link in consumer.links] == [context.span_id]  # ... linked
    assert consumer.attributes is not None
    assert consumer.attributes["messaging.operation.type"] == "process"
    assert consumer.attributes["messaging.message.id"] == jid
    assert [e.name for e in producer.events] == ["created_at"]
    assert [e.name for e in consumer.events] == ["created_at", "enqueued_at"]
    assert seen[0]["span"] == consumer_context.span_id  # the job runs inside the span


def test_child_propagation_joins_the_producers_trace(exporter: InMemorySpanExporter) -> None:
    config, _ = traced_config(exporter, "child")
    with testing.fake(config) as queues:
        Traced.perform_async(1)
        queues.drain()
    [producer] = spans(exporter, SpanKind.PRODUCER)
    [consumer] = spans(exporter, SpanKind.CONSUMER)
    assert consumer.parent is not None and producer.context is not None
    assert consumer.parent.span_id == producer.context.span_id
    assert consumer.links == ()


def test_a_payload_written_by_rubys_sidekiq_instrumentation(
    exporter: InMemorySpanExporter,
) -> None:
    """Ruby's opentelemetry-instrumentation-sidekiq calls OpenTelemetry.propagation.inject(job):
    the W3C fields are top-level string fields of the job hash."""
    config, _ = traced_config(exporter)
    ruby_trace, ruby_span = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
    ruby_job = json.dumps({
        "retry": True, "queue": "mail", "class": Traced.job_name(), "args": [7],
        "jid": "5b3c0a1f9d8e7c6b5a4f3e2d", "created_at": 1732400000.123,
        "enqueued_at": 1732400000.125, "traceparent": f"00-{ruby_trace}-{ruby_span}-01",
        "tracestate": "congo=t61rcWkgMzE", "baggage": "user.id=7",
    })
    queues = testing.FakeQueues(config)
    queues.write([BufferedJob("mail", ruby_job, None)], lambda jobs: None)
    queues.drain()
    [consumer] = spans(exporter, SpanKind.CONSUMER)
    [link] = consumer.links
    assert (f"{link.context.trace_id:032x}", f"{link.context.span_id:016x}") == (
        ruby_trace, ruby_span
    )
    assert link.context.trace_state.get("congo") == "t61rcWkgMzE"
    assert seen[0]["user"] == "7"  # baggage reaches the job


def test_a_failing_job_records_the_error_and_still_raises(exporter: InMemorySpanExporter) -> None:
    config, _ = traced_config(exporter)
    with testing.fake(config) as queues:
        Traced.perform_async(-1)
        with pytest.raises(ValueError, match="negative user"):
            queues.drain()
    [consumer] = spans(exporter, SpanKind.CONSUMER)
    assert consumer.status.status_code is StatusCode.ERROR
    assert [e.name for e in consumer.events] == ["exception"]


def test_no_propagation_ignores_the_payloads_context(exporter: InMemorySpanExporter) -> None:
    config, _ = traced_config(exporter, "none")
    with testing.fake(config) as queues:
        Traced.perform_async(1)
        queues.drain()
    [consumer] = spans(exporter, SpanKind.CONSUMER)
    assert consumer.links == () and consumer.parent is None
    assert consumer.events == ()  # events are off by default


def test_bad_propagation_is_refused() -> None:
    with pytest.raises(rfetch.ConfigError, match="propagation"):
        otel.ServerTracing(propagation="sideways")  # type: ignore[arg-type]


class AsyncTraced(rfetch.Job):
    async def perform(self) -> None:
        seen.append({"span": trace.get_current_span().get_span_context().span_id})


def test_an_async_job_runs_inside_its_consumer_span(exporter: InMemorySpanExporter) -> None:
    config, _ = traced_config(exporter)
    with testing.fake(config) as queues:
        AsyncTraced.perform_async()
        queues.drain()
    [producer] = spans(exporter, SpanKind.PRODUCER)
    [consumer] = spans(exporter, SpanKind.CONSUMER)
    assert consumer.context is not None and producer.context is not None
    assert seen == [{"span": consumer.context.span_id}]
    assert [link.context.span_id for link in consumer.links] == [producer.context.span_id]
