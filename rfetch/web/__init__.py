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
    """Build the web UI.

    Args:
        config: Redis URL and namespace (default: ``Config.from_env()``, i.e. ``REDIS_URL``
            and ``RFETCH_NAMESPACE``). With ``shards`` (``RFETCH_SHARDS``), the UI reads
            every shard and merges them (:class:`rfetch.api.shards.ShardedApi`).
        api: an existing :class:`rfetch.api.Api` (then ``config`` and ``redis`` are not
            used).
        redis: an existing client to read through (with ``config`` for the namespace).
        read_only: refuse every action with 403 and show no action button.
        auth: a callable taking the WSGI environ and returning True to let the request
            through (False: 403). Runs after basic auth.
        basic_auth: credentials for HTTP basic auth: a ``(user, password)`` pair or a
            :class:`BasicAuth`; True (the default) reads ``RFETCH_WEB_USER`` and
            ``RFETCH_WEB_PASSWORD`` when set; False turns it off.
        prefix: path the app answers under when the server does not set ``SCRIPT_NAME``
            (e.g. ``/rfetch``); leave empty when mounting with a dispatcher that does.
        poll_interval: seconds between polls of the dashboard's live chart.
        metrics_window: minutes of per-class figures reported by ``/metrics`` (1-120).
        title: name shown in the header.
        open_warning: show a banner on every page warning that anyone who can reach the UI
            can use it (``rfetch web`` sets it when bound beyond localhost without auth).
        secret_key: the key the CSRF tokens are signed with (at least 16 characters);
            default ``RFETCH_WEB_SECRET_KEY``, else random bytes drawn now: tokens then
            stop working when the process restarts and are valid on this process only,
            so give every web process of a deployment the same key.
        trusted_origins: origins (``https://admin.example.com``, or
            ``https://*.example.com`` for every subdomain) whose POSTs are let through
            although the browser calls them another site (see :mod:`rfetch.web.csrf`).
        outbox_database: the URL of the transactional outbox's database
            (docs/outbox.md): the dashboard and ``/metrics`` then show its backlog.

    Raises:
        ValueError: only one of ``RFETCH_WEB_USER`` / ``RFETCH_WEB_PASSWORD`` is set, a
            bad ``metrics_window``, a secret key under 16 characters or a malformed
            trusted origin.
    """
    shards = None
    if api is None:
        config = config or Config.from_env()
        if config.shards and redis is None:
            shards = ShardedApi(config)
            api = shards.shard(0)
        else:
            api = Api(config, redis=redis)
    if basic_auth is True:
        credentials = BasicAuth.from_env()
    elif basic_auth is False:
        credentials = None
    elif isinstance(basic_auth, BasicAuth):
        credentials = basic_auth
    else:
        credentials = BasicAuth(*basic_auth)
    if not 1 <= metrics_window <= 120:
        raise ValueError("metrics_window must be between 1 and 120 minutes")
    csrf = CsrfGuard.from_settings(secret_key, trusted_origins)
    return WebApp(
        api,
        shards=shards,
        read_only=read_only,
        auth=auth,
        basic_auth=credentials,
        prefix=prefix,
        poll_interval=poll_interval,
        metrics_window=metrics_window,
        title=title,
        open_warning=open_warning,
        csrf=csrf,
        outbox=OutboxView(outbox_database) if outbox_database else None,
    )


__all__ = ["AuthHook", "BasicAuth", "CsrfGuard", "WebApp", "create_app", "normalize_prefix"]
