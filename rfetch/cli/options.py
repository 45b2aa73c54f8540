"""Options and the Redis connection shared by the admin commands."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from rfetch.api import Api
from rfetch.api.shards import ShardedApi
from rfetch.config import Config
from rfetch.errors import RfetchError
from rfetch.formatting import safe_url

if TYPE_CHECKING:
    from rfetch.api import Api
    from rfetch.api.shards import ShardedApi

REDIS_URL_HELP = "Redis URL [env: REDIS_URL; default redis://localhost:6379/0]."
NAMESPACE_HELP = "Key prefix (keys become NAMESPACE:queue:...)."

Decorator = Callable[..., Any]


def connection_options(func: Decorator) -> Decorator:
    """``--redis-url``, ``--namespace`` and ``--json``, as every admin command takes them."""
    func = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(func)
    func = click.option("--namespace", envvar="RFETCH_NAMESPACE", default=None,
                        help=NAMESPACE_HELP)(func)
    return click.option("--redis-url", envvar="REDIS_URL", default=None,
                        help=REDIS_URL_HELP)(func)


def filter_options(func: Decorator) -> Decorator:
    """``--class`` and ``--grep``: which jobs of a queue or set a command looks at."""
    func = click.option("--grep", default=None, metavar="TEXT",
                        help="Substring (any case) of the args' JSON or the error message.")(func)
    return click.option("--class", "job_class", default=None, metavar="NAME",
                        help="Job class (exact, or its last part: SendWelcome).")(func)


@contextmanager
def admin_view(redis_url: str | None, namespace: str | None) -> Iterator[Api | ShardedApi]:
    """Like :func:`admin_api`, but over every shard when ``RFETCH_SHARDS`` is set (a
    :class:`rfetch.api.shards.ShardedApi`: counters summed, queues with their shard).

    Raises:
        click.ClickException: as :func:`admin_api`.
    """
    from redis.exceptions import RedisError


    try:
        config = Config.from_env(redis_url=redis_url, namespace=namespace)
        view: Api | ShardedApi = ShardedApi(config) if config.shards else Api(config)
    except RfetchError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        yield view
    except (RedisError, OSError) as exc:
        where = " ".join(safe_url(url) for url in config.shards) or safe_url(config.redis_url)
        raise click.ClickException(f"Redis at {where}: {exc}") from None
    finally:
        if isinstance(view, ShardedApi):
            view.close()
        else:
            view.redis.close()


@contextmanager
def admin_api(redis_url: str | None, namespace: str | None) -> Iterator[Api]:
    """An :class:`rfetch.api.Api` for one command, closed afterwards.

    Raises:
        click.ClickException: a bad setting, or a Redis error while the block runs (a
            one-line message, exit 1).
    """
    from redis.exceptions import RedisError


    try:
        config = Config.from_env(redis_url=redis_url, namespace=namespace)
        api = Api(config)
    except RfetchError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        yield api
    except (RedisError, OSError) as exc:
        raise click.ClickException(f"Redis at {safe_url(config.redis_url)}: {exc}") from None
    finally:
        api.redis.close()
