"""``rfetch enqueue``: push one job from the shell."""

from __future__ import annotations

import json
import time
from typing import Any

import click

from rfetch.config import Config
from rfetch.errors import RfetchError
from rfetch.formatting import safe_url
from rfetch.push.client import Client

from .app import main
from .job_lookup import find_job
from .options import REDIS_URL_HELP


@main.command()
@click.argument("name")
@click.argument("json_args", default="[]")
@click.option("-q", "--queue", default=None,
              help="Queue. [default: the job class's queue; default with --external]")
@click.option("--retry", type=int, default=None,
              help="Retries. [default: the job class's retry; 25 with --external]")
@click.option("--in", "delay", type=float, default=None, help="Run after this many seconds.")
@click.option("--priority", type=int, default=None,
              help="Priority inside the queue, -100..100: higher runs first. "
              "[default: the job class's priority; 0]")
@click.option("--redis-url", envvar="REDIS_URL", default=None, help=REDIS_URL_HELP)
@click.option("--namespace", envvar="RFETCH_NAMESPACE", default=None)
@click.option("--external", is_flag=True,
              help="Push NAME unchecked: a class only another process (a Ruby worker) "
              "runs, or one registered under its own name.")
def enqueue(
    name: str,
    json_args: str,
    queue: str | None,
    retry: int | None,
    delay: float | None,
    priority: int | None,
    redis_url: str | None,
    namespace: str | None,
    external: bool,
) -> None:
    """Push one job named NAME (myapp.jobs.SendWelcome) with JSON_ARGS (a JSON array);
    prints the jid.

    NAME is imported from the current folder, as the worker's -r does: a name that is not
    a job class (a typo: close names are suggested) exits 1 and pushes nothing, unless
    --external is given.

    Exits 1 without a jid when the job did not reach Redis (unreachable, or an error).
    """
    from redis.exceptions import RedisError


    try:
        args: Any = json.loads(json_args)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="JSON_ARGS") from None
    if not isinstance(args, list):
        raise click.BadParameter("must be a JSON array, e.g. '[1, \"a\"]'", param_hint="JSON_ARGS")
    options: dict[str, Any] = {"queue": "default"}
    if not external:
        try:
            options = find_job(name).default_options()
        except RfetchError as exc:
            raise click.ClickException(str(exc)) from None
    if queue is not None:
        options["queue"] = queue
    if retry is not None:
        options["retry"] = retry
    if priority is not None:
        options["priority"] = priority
    try:
        config = Config.from_env(redis_url=redis_url, namespace=namespace)
        client = Client(config)
        # No reliable-push buffer: a jid printed here is a job in Redis, and a job that is
        # not is an error (exit 1), never a buffer lost when this process ends.
        jid = client.push(
            name, args, options, at=None if delay is None else time.time() + delay, buffer=False
        )
    except RfetchError as exc:
        raise click.ClickException(str(exc)) from None
    except (RedisError, OSError) as exc:
        raise click.ClickException(
            f"job not enqueued: Redis at {safe_url(config.redis_url)}: {exc}"
        ) from None
    if jid is None:
        raise click.ClickException("job not enqueued: dropped by client middleware")
    click.echo(jid)
