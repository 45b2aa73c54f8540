"""The rfetch web UI: a WSGI application.

::

    from rfetch import Config
    from rfetch.web import create_app

    app = create_app(Config.from_env())                    # any WSGI server
    app = create_app(config, read_only=True, auth=lambda environ: ...)

Mount it under a prefix in Flask, Django or any WSGI server (``SCRIPT_NAME`` is honoured),
or in an ASGI application through ``a2wsgi.WSGIMiddleware``; serve it alone with
``rfetch web``. Needs the ``web`` extra. See ``docs/web.md``.
"""

from __future__ import annotations

from collections.abc import Sequence

from redis import Redis

from rfetch.api import Api
from rfetch.api.shards import ShardedApi
from rfetch.config import Config
from rfetch.outbox.faces import OutboxView

from .application import WebApp, normalize_prefix
from .csrf import CsrfGuard
from .security import AuthHook, BasicAuth


def create_app(
    config: Config | None = None,
    *,
    api: Api | None = None,
    redis: Redis | None = None,
    read_only: bool = False,
    auth: AuthHook | None = None,
    basic_auth: BasicAuth | tuple[str, str] | bool = True,
    prefix: str = "",
    poll_interval: float = 5.0,
    metrics_window: int = 5,
    title: str = "rfetch",
    open_warning: bool = False,
    secret_key: str | bytes | None = None,
    trusted_origins: Sequence[str] = (),
    outbox_database: str | None = None,
) -> WebApp:
    """Build the web UI, a WSGI application (docs/web.md).

    Args:
        config: Redis URL and namespace (default: ``Config.from_env()``, i.e. ``REDIS_URL``
            and ``RFETCH_NAMESPACE``). With ``shards`` (``RFETCH_SHARDS``), the UI reads
            every shard and merges them (:class:`rfetch.api.shards.ShardedApi`).
        api: an existing :class:`rfetch.api.Api` (then ``config`` and ``redis`` are unused).
        redis: an existing client to read through (with ``config`` for the namespace).
        read_only: refuse every action with 403 and show no action button.
        auth: a callable taking the WSGI environ and returning True to let the request
            through (False: 403). Runs after basic auth.
        basic_auth: a ``(user, password)`` pair or a :class:`BasicAuth`; True (the default)
            reads ``RFETCH_WEB_USER`` and ``RFETCH_WEB_PASSWORD`` when set; False: none.
        prefix: path the app answers under when the server does not set ``SCRIPT_NAME``
            (e.g. ``/rfetch``); leave empty under a dispatcher that sets it.
        poll_interval: seconds between polls of the dashboard's live chart.
        metrics_window: minutes of per-class figures reported by ``/metrics`` (1-120).
        title: name shown in the header.
        open_warning: a banner on every page: anyone who can reach the UI can use it
            (``rfetch web`` sets it when bound beyond localhost without auth).
        secret_key: the CSRF tokens' signing key (at least 16 characters); default
            ``RFETCH_WEB_SECRET_KEY``, else random bytes drawn now, whose tokens end with
            this process and hold on it only (give a deployment's web processes one key).
        trusted_origins: origins (``https://admin.example.com``; ``https://*.example.com``
            for every subdomain) whose POSTs pass although cross-site (:mod:`rfetch.web.csrf`).
        outbox_database: URL of the transactional outbox's database (docs/outbox.md),
            whose backlog the dashboard and ``/metrics`` then show.

    Raises:
        ValueError: only one of ``RFETCH_WEB_USER`` / ``RFETCH_WEB_PASSWORD`` is set, a
            bad ``metrics_window``, a secret key under 16 characters or a malformed
            trusted origin.
    """
    api, shards = _reader(config, api, redis)
    credentials = _credentials(basic_auth)
    csrf = CsrfGuard.from_settings(secret_key, trusted_origins)
    outbox = OutboxView(outbox_database) if outbox_database else None
    return WebApp(api, shards=shards, read_only=read_only, auth=auth, basic_auth=credentials,
                  prefix=prefix, poll_interval=poll_interval, metrics_window=metrics_window,
                  title=title, open_warning=open_warning, csrf=csrf, outbox=outbox)


def _reader(
    config: Config | None, api: Api | None, redis: Redis | None
) -> tuple[Api, ShardedApi | None]:
    """The Api the UI reads through (``api`` itself when given) and, with ``config.shards``
    and no ``redis``, the merged view of every shard (the Api is then the first shard's)."""
    if api is not None:
        return api, None
    config = config or Config.from_env()
    if config.shards and redis is None:
        shards = ShardedApi(config)
        return shards.shard(0), shards
    return Api(config, redis=redis), None


def _credentials(basic_auth: BasicAuth | tuple[str, str] | bool) -> BasicAuth | None:
    """``create_app``'s ``basic_auth`` as credentials: True reads them from the environment
    (None when unset), False turns basic auth off.

    Raises:
        ValueError: as :meth:`BasicAuth.from_env`.
    """
    if basic_auth is True:
        return BasicAuth.from_env()
    if basic_auth is False:
        return None
    if isinstance(basic_auth, BasicAuth):
        return basic_auth
    return BasicAuth(*basic_auth)


__all__ = ["AuthHook", "BasicAuth", "CsrfGuard", "WebApp", "create_app", "normalize_prefix"]
