"""``rfetch explain`` (where is this job, why is it not running) and ``rfetch check``
(a monitoring probe)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from rfetch.config import Config
from rfetch.errors import RedisUnavailable, RfetchError
from rfetch.formatting import safe_url

if TYPE_CHECKING:
    from rfetch.api.shards import ShardedApi

from rfetch.api import Api
from rfetch.api.shards import ShardedApi

from .app import main
from .options import admin_view, connection_options
from .outbox import check_outbox, outbox_lines, outbox_option
from .output import echo_json

EXIT_CHECK_FAILED = 1
"""``rfetch check``: a threshold was crossed (Nagios CRITICAL is 2, but 2 is click's usage
error; monitors should treat any non-zero code as failure)."""

EXIT_UNREACHABLE = 3
"""``rfetch check``: Redis could not be asked (Nagios UNKNOWN)."""


@main.command()
@click.argument("jid")
@click.option("--max-scan", type=click.IntRange(min=1), default=100_000, show_default=True,
              help="Most entries examined per queue, private list or set.")
@outbox_option
@connection_options
def explain(
    jid: str, max_scan: int, outbox_database: str | None, redis_url: str | None,
    namespace: str | None, as_json: bool
) -> None:
    """Where job JID is and why it is not running (on which shard, when RFETCH_SHARDS is
    set; in the transactional outbox, with --outbox-database). Exits 1 when it is not
    found."""
    outbox = outbox_lines(outbox_database, jid)
    with admin_view(redis_url, namespace) as view:
        if isinstance(view, ShardedApi):
            _explain_on_shards(view, jid, max_scan, as_json)
            return
        answer = view.explain(jid, max_scan)
    if as_json:
        echo_json({**answer.to_dict(), **({"outbox": outbox} if outbox_database else {})})
    else:
        for line in [*outbox, *(answer.lines() if answer.found or not outbox else [])]:
            click.echo(line)
    if not answer.found and not outbox:
        sys.exit(1)


def _explain_on_shards(view: ShardedApi, jid: str, max_scan: int, as_json: bool) -> None:
    found = [(name, view.shard(int(name)).explain(jid, max_scan)) for name in view.names()]
    found = [(name, answer) for name, answer in found if answer.found]
    if as_json:
        echo_json([{"shard": name, **answer.to_dict()} for name, answer in found])
    for name, answer in [] if as_json else found:
        click.echo(f"shard {name}:")
        for line in answer.lines():
            click.echo(f"  {line}")
    if not found:
        if not as_json:
            click.echo(f"{jid}: not found on any shard")
        sys.exit(1)


@main.command()
@click.option("--max-latency", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
              help="Fail when a queue's oldest job has waited longer.")
@click.option("--max-size", type=click.IntRange(min=0), default=None, metavar="JOBS",
              help="Fail when a queue holds more jobs.")
@click.option("--queue", default=None, help="Check this queue only (default: all).")
@outbox_option
@click.option("--max-outbox-age", type=click.FloatRange(min=0), default=None,
              metavar="SECONDS", help="With --outbox-database: fail when its oldest row "
              "has waited longer for the relay.")
@click.option("--max-outbox-size", type=click.IntRange(min=0), default=None, metavar="ROWS",
              help="With --outbox-database: fail when it holds more rows.")
@connection_options
def check(
    max_latency: float | None,
    max_size: int | None,
    queue: str | None,
    outbox_database: str | None,
    max_outbox_age: float | None,
    max_outbox_size: int | None,
    redis_url: str | None,
    namespace: str | None,
    as_json: bool,
) -> None:
    """Monitoring probe: one line, exit 0 (OK), 1 (threshold crossed) or 3 (Redis
    unreachable)."""
    from redis.exceptions import RedisError


    try:
        api = Api(Config.from_env(redis_url=redis_url, namespace=namespace))
    except RedisUnavailable as exc:  # no sentinel answered
        click.echo(f"UNKNOWN {exc}")
        sys.exit(EXIT_UNREACHABLE)
    except RfetchError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        result = api.check(max_latency, max_size, queue)
    except (RedisError, OSError) as exc:
        click.echo(f"UNKNOWN cannot read Redis at {safe_url(api.config.redis_url)}: {exc}")
        sys.exit(EXIT_UNREACHABLE)
    finally:
        api.redis.close()
    verdict = check_outbox(outbox_database, max_outbox_age, max_outbox_size)
    if as_json:
        echo_json({**result.to_dict(), **({"outbox": verdict[1]} if verdict else {})})
    else:
        click.echo(result.message if verdict is None else f"{result.message}; {verdict[1]}")
    if verdict is not None and verdict[0] is None:
        sys.exit(EXIT_UNREACHABLE)
    sys.exit(0 if result.ok and (verdict is None or verdict[0]) else EXIT_CHECK_FAILED)
