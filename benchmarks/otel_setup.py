"""``rfetch worker -r benchmarks.otel_setup``: the OpenTelemetry middleware with the SDK, every
span sampled and handed to a BatchSpanProcessor whose exporter drops it, so what is measured
is the middleware and the SDK's span handling, not an exporter's network.

Used by ``python -m benchmarks.otel_cost``.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import rfetch
from rfetch.integrations import opentelemetry as rfetch_otel


class Discard(SpanExporter):
    """Drops every span."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def configure_worker(config: rfetch.Config) -> None:
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Discard()))
    rfetch_otel.install(config, provider)
