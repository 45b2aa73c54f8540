"""Redis Sentinel: ``redis+sentinel://`` URLs and clients that follow a failover.

A Sentinel URL names the sentinels, the master's name and the database::

    redis+sentinel://[[user]:password@]host:26379,host2:26379/mymaster/0

The credentials are the master's (``requirepass``); a password for the sentinels themselves
is ``Config.sentinel_password``. The client is redis-py's own
:class:`redis.sentinel.SentinelConnectionPool`: each new connection asks the sentinels for
the current master, and a connection to a master that was demoted to a replica fails with a
``ConnectionError`` ("the previous master is now a slave"). rfetch's threads already treat
that as "Redis unreachable" (back off, reconnect), so they follow a failover without a restart.
The asyncio client uses redis-py's asyncio form of the same pool
(:func:`connect_sentinel_async`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import redis.asyncio
import redis.asyncio.sentinel
from redis import Redis
from redis.exceptions import ConnectionError, ResponseError, TimeoutError
from redis.sentinel import Sentinel

from rfetch.errors import ConfigError, RedisUnavailable
from rfetch.formatting import safe_url

SCHEME = "redis+sentinel://"
DEFAULT_SENTINEL_PORT = 26379


def is_sentinel_url(url: str) -> bool:
    """Whether ``url`` is a ``redis+sentinel://`` URL."""
    return url.startswith(SCHEME)


@dataclass(frozen=True)
class SentinelUrl:
    """A parsed ``redis+sentinel://`` URL.

    Attributes:
        sentinels: (host, port) of each sentinel, in the URL's order.
        master: the master's name in the sentinels' configuration (``mymaster``).
        db: database number (default 0).
        username, password: the master's credentials, or None.
    """

    sentinels: tuple[tuple[str, int], ...]
    master: str
    db: int = 0
    username: str | None = None
    password: str | None = None

    @classmethod
    def parse(cls, url: str) -> SentinelUrl:
        """Parse ``redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/master[/db]``.

        Raises:
            ConfigError: another scheme, no sentinel, a bad port, no master name, or a db
                that is not a whole number.
        """
        if not is_sentinel_url(url):
            raise ConfigError(f"a Sentinel URL starts with {SCHEME}, got {url!r}")
        rest = url[len(SCHEME):]
        location, slash, path = rest.partition("/")
        if "?" in path or "#" in path:
            raise ConfigError(f"a Sentinel URL takes no query or fragment: {safe_url(url)}")
        userinfo, at, hosts_text = location.rpartition("@")
        username = password = None
        if at:
            user_text, colon, password_text = userinfo.partition(":")
            username = unquote(user_text) or None
            password = unquote(password_text) if colon else None
        sentinels = tuple(_parse_host(part, url) for part in hosts_text.split(","))
        parts = path.split("/") if slash else []
        if not parts or not parts[0]:
            raise ConfigError(
                f"a Sentinel URL names the master after the hosts "
                f"({SCHEME}host:26379/mymaster/0): {safe_url(url)}"
            )
        if len(parts) > 2 or (len(parts) == 2 and not parts[1].isdigit()):
            raise ConfigError(f"the db of a Sentinel URL must be a whole number: {safe_url(url)}")
        db = int(parts[1]) if len(parts) == 2 else 0
        return cls(sentinels, unquote(parts[0]), db, username, password)


def _parse_host(part: str, url: str) -> tuple[str, int]:
    host, colon, port_text = part.strip().rpartition(":") if ":" in part else (part, "", "")
    host = host.strip().strip("[]")
    if not host:
        raise ConfigError(f"a Sentinel URL has an empty host: {safe_url(url)}")
    if not colon:
        return host, DEFAULT_SENTINEL_PORT
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ConfigError(f"bad sentinel port {port_text!r} in {safe_url(url)}")
    return host, int(port_text)


def connect_sentinel(
    url: str,
    connection_kwargs: dict[str, Any],
    *,
    sentinel_password: str | None = None,
) -> Redis:
    """A client of the master that ``url`` names, checked once at start.

    Args:
        url: a ``redis+sentinel://`` URL.
        connection_kwargs: keyword arguments for the master's connections (socket timeouts
            in seconds, ``retry``, ``max_connections``); the sentinels get the socket
            timeouts.
        sentinel_password: password of the sentinels (``requirepass`` in sentinel.conf).

    Raises:
        ConfigError: a malformed URL, or sentinels that know no master of that name.
        RedisUnavailable: none of the sentinels answered (the message lists each error).
    """
    parsed = SentinelUrl.parse(url)
    # redis-py's sentinel module has no type hints.
    sentinel = Sentinel(  # type: ignore[no-untyped-call]
        list(parsed.sentinels),
        sentinel_kwargs=_sentinel_kwargs(connection_kwargs, sentinel_password),
    )
    check_master(sentinel, parsed)
    master: Redis = sentinel.master_for(  # type: ignore[no-untyped-call]
        parsed.master,
        db=parsed.db,
        username=parsed.username,
        password=parsed.password,
        **connection_kwargs,
    )
    return master


def connect_sentinel_async(
    url: str,
    connection_kwargs: dict[str, Any],
    *,
    sentinel_password: str | None = None,
) -> redis.asyncio.Redis:
    """:func:`connect_sentinel` for asyncio code: a ``redis.asyncio`` client of the master
    that ``url`` names, whose connections ask the sentinels for the current master as the
    threaded client's do, so it follows a failover the same way.

    The sentinels are not asked here: the threaded client of the same Config asked them
    when it was made (:class:`rfetch.Client`), and this is called from a running event loop.

    Args:
        url, connection_kwargs, sentinel_password: as :func:`connect_sentinel`.

    Raises:
        ConfigError: a malformed URL.
    """
    parsed = SentinelUrl.parse(url)
    sentinel = redis.asyncio.sentinel.Sentinel(  # type: ignore[no-untyped-call]
        list(parsed.sentinels),
        sentinel_kwargs=_sentinel_kwargs(connection_kwargs, sentinel_password),
    )
    master: redis.asyncio.Redis = sentinel.master_for(
        parsed.master,
        db=parsed.db,
        username=parsed.username,
        password=parsed.password,
        **connection_kwargs,
    )
    return master


def _sentinel_kwargs(
    connection_kwargs: dict[str, Any], sentinel_password: str | None
) -> dict[str, Any]:
    """The sentinels' own connection settings: the socket timeouts of the master's, and
    their password."""
    kwargs = {k: v for k, v in connection_kwargs.items() if k.startswith("socket_")}
    if sentinel_password is not None:
        kwargs["password"] = sentinel_password
    return kwargs


def check_master(sentinel: Sentinel, parsed: SentinelUrl) -> None:
    """Ask every sentinel for the master once, so a wrong setting fails at start.

    Raises:
        ConfigError: sentinels answered but none knows a master named ``parsed.master``.
        RedisUnavailable: no sentinel answered.
    """
    errors: list[str] = []
    answered = False
    # Sentinel's constructor keeps the given order, so each client matches its address.
    for (host, port), client in zip(parsed.sentinels, sentinel.sentinels, strict=True):
        try:
            address = client.execute_command(  # type: ignore[no-untyped-call]
                "SENTINEL", "GET-MASTER-ADDR-BY-NAME", parsed.master
            )
        except (ConnectionError, TimeoutError, OSError, ResponseError) as exc:
            errors.append(f"{host}:{port}: {exc}")
            continue
        answered = True
        if address:
            return
    if answered:
        raise ConfigError(
            f"the sentinels at {_addresses(parsed)} know no master named {parsed.master!r}"
        )
    raise RedisUnavailable(
        f"no sentinel reachable for master {parsed.master!r}: {'; '.join(errors)}"
    )


def _addresses(parsed: SentinelUrl) -> str:
    return ",".join(f"{host}:{port}" for host, port in parsed.sentinels)
