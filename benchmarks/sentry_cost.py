"""The per-job cost of the Sentry server middleware alone (in this process, no Redis): one
job run through ``SentryServerMiddleware`` with sentry-sdk initialised on a transport that
drops what it is given, for each traces sample rate asked.

    python -m benchmarks.sentry_cost [--jobs 20000] [--rate none --rate 0 --rate 1]

``none``: tracing off (the isolation scope and the push's trace only); ``0``: tracing on,
no run sampled (an unsampled transaction per run); ``1``: every run a transaction, built and
serialised. Needs the ``sentry`` extra.
"""

from __future__ import annotations

import time

import click
import sentry_sdk
from sentry_sdk.envelope import Envelope
from sentry_sdk.transport import Transport

from rfetch.integrations.sentry.tracing import FailedRuns, SentryServerMiddleware
from rfetch.jobs.schedule import PeriodicRegistry


class Dropping(Transport):
    def capture_envelope(self, envelope: Envelope) -> None:
        pass


def per_job_us(rate: float | None, jobs: int) -> float:
    """Microseconds per job through the middleware at ``rate``."""
    sentry_sdk.init(dsn="http://public@localhost/1", transport=Dropping(),
                    traces_sample_rate=rate, auto_enabling_integrations=False)
    try:
        middleware = SentryServerMiddleware(PeriodicRegistry(), FailedRuns())
        payload = {"class": "app.Job", "jid": "0" * 24, "args": [], "queue": "default",
                   "enqueued_at": time.time()}
        started = time.perf_counter()
        for _ in range(jobs):
            middleware(None, payload, "default", lambda: None)  # type: ignore[arg-type]
        return (time.perf_counter() - started) / jobs * 1e6
    finally:
        sentry_sdk.get_client().close()


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--jobs", default=20_000, show_default=True)
@click.option("--rate", "rates", multiple=True, default=["none", "0", "1"], show_default=True,
              help="Traces sample rate, or 'none' (tracing off); repeatable.")
def main(jobs: int, rates: tuple[str, ...]) -> None:
    """Microseconds per job added by the Sentry server middleware."""
    for text in rates:
        rate = None if text == "none" else float(text)
        click.echo(f"traces_sample_rate={text}: {per_job_us(rate, jobs):.0f} us per job")


if __name__ == "__main__":
    main()
