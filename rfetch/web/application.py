"""The web UI as a WSGI application: prefix handling, authentication, CSRF checks, request
limits, dispatch to the views, rendering and the answers to errors (Sidekiq's
``web/application.rb`` and ``web/action.rb``).

Every figure and every action goes through :class:`rfetch.api.Api`; the views
(:mod:`rfetch.web.views`) read requests, call the API and render its answers. With shards
(``Config.shards``) the dashboard, queues, busy, set and explain pages merge every shard that
answers (:class:`rfetch.api.shards.ShardedApi`), naming each row's shard, and every action
goes to the shard its form names. See ``docs/web.md``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import mimetypes
import time
from collections.abc import Iterable
from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from werkzeug.exceptions import HTTPException, NotFound
from werkzeug.wrappers import Request, Response

from rfetch.api import Api
from rfetch.api.shards import ShardedApi
from rfetch.formatting import safe_url
from rfetch.outbox.faces import OutboxView
from rfetch.version import __version__

from .action import (
    FLASH_COOKIE,
    Ctx,
    Forbidden,
    Redirect,
    StartResponse,
    WSGIEnviron,
    cookie_path,
    read_flash,
)
from .csrf import CSRF_COOKIE, CSRF_FIELD, CsrfGuard
from .formatting import FILTERS
from .router import ACTION_LABELS, VIEWS, url_map
from .security import AuthHook, BasicAuth

log = logging.getLogger("rfetch.web")

MAX_BODY_BYTES = 1024 * 1024
"""Largest request body accepted, bytes (a form selecting 200 jobs is about 10 KB); a larger
one is refused with 413 before it is read."""

SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
}


class LimitedRequest(Request):
    """A request whose body and form are bounded (werkzeug answers 413 beyond them)."""

    max_content_length = MAX_BODY_BYTES
    max_form_memory_size = MAX_BODY_BYTES
    max_form_parts = 1000


class WebApp:
    """The WSGI application; build it with :func:`rfetch.web.create_app`.

    Args:
        api: the admin API (one client, shared by every request and thread).
        read_only: refuse every action (403) and show no action button.
        auth: a hook called with the WSGI environ; False answers 403.
        basic_auth: HTTP basic auth credentials, or None.
        prefix: a path the app is mounted under when the server does not set
            ``SCRIPT_NAME`` itself (``rfetch web --prefix /rfetch``); requests outside it
            get 404.
        poll_interval: seconds between polls of the dashboard's live chart.
        metrics_window: minutes of per-class percentiles in ``/metrics``.
        title: shown in the header and the page titles.
        open_warning: show a banner on every page saying that anyone who can reach the UI
            can use it (``rfetch web`` sets it when bound beyond localhost without auth).
        shards: with ``Config.shards``, the merged view of every shard (``api`` is then
            the first shard's).
        csrf: the CSRF checks and their secret key (default: ``RFETCH_WEB_SECRET_KEY``,
            else a random per-process key; see :mod:`rfetch.web.csrf`).
        outbox: the transactional outbox's database, whose backlog the dashboard and
            ``/metrics`` show; None for none.

    Raises:
        ValueError: a ``metrics_window`` outside 1-120 minutes.
    """

    def __init__(
        self,
        api: Api,
        *,
        shards: ShardedApi | None = None,
        read_only: bool = False,
        auth: AuthHook | None = None,
        basic_auth: BasicAuth | None = None,
        prefix: str = "",
        poll_interval: float = 5.0,
        metrics_window: int = 5,
        title: str = "rfetch",
        open_warning: bool = False,
        csrf: CsrfGuard | None = None,
        outbox: OutboxView | None = None,
    ) -> None:
        self.api = api
        self.shards = shards
        self.read_only = read_only
        self.auth = auth
        self.basic_auth = basic_auth
        self.prefix = normalize_prefix(prefix)
        self.poll_interval = poll_interval
        if not 1 <= metrics_window <= 120:
            raise ValueError("metrics_window must be between 1 and 120 minutes")
        self.metrics_window = metrics_window
        self.title = title
        self.open_warning = open_warning
        self.csrf = csrf if csrf is not None else CsrfGuard.from_settings()
        self.outbox = outbox
        self.metrics_registries: dict[int, Any] = {}
        """The ``/metrics`` registry of each shard (0 without shards), built at first use."""
        self.url_map = url_map()
        self.env = Environment(
            loader=PackageLoader("rfetch.web", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters.update(FILTERS)
        self.static_files = _load_static()

    # -- WSGI ----------------------------------------------------------------------------

    def __call__(self, environ: WSGIEnviron, start_response: StartResponse) -> Iterable[bytes]:
        if self.prefix:
            path = environ.get("PATH_INFO", "") or "/"
            if path == self.prefix or path.startswith(self.prefix + "/"):
                environ = dict(environ)
                environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + self.prefix
                environ["PATH_INFO"] = path[len(self.prefix):] or "/"
            elif path == "/" and not environ.get("SCRIPT_NAME"):
                response = Response(status=302, headers={"Location": self.prefix + "/"})
                return response(environ, start_response)
            else:
                return NotFound()(environ, start_response)
        request = LimitedRequest(environ)
        response = self.handle(request)
        return response(environ, start_response)

    def handle(self, request: Request) -> Response:
        """Bound the body, authenticate, route, check POSTs, run the view, add headers."""
        if (request.content_length or 0) > MAX_BODY_BYTES:
            return self._secure(Response(
                f"Request body over {MAX_BODY_BYTES:,} bytes refused.\n", status=413,
                mimetype="text/plain",
            ))
        denied = self._authenticate(request)
        if denied is not None:
            return self._secure(denied)
        urls = self.url_map.bind_to_environ(request.environ)
        session, new = self.csrf.session(request)
        ctx = Ctx(self, request, urls, self.csrf.token(session), session if new else None,
                  read_flash(request))
        try:
            endpoint, values = urls.match()
            ctx.endpoint = endpoint
            if request.method == "POST":
                self._check_post(request)
            response = VIEWS[endpoint](ctx, **values)
        except Redirect as exc:
            response = self._redirect(ctx, exc)
        except HTTPException as exc:
            response = self._error(ctx, exc)
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            log.warning("Redis error while serving %s: %s", request.path, exc)
            response = self._unavailable(ctx, f"Cannot read Redis at "
                                              f"{self._redis_name(ctx)}: {exc}")
        except RedisError as exc:
            # A reply error (wrong key type, OOM, READONLY...): Redis answered, so say so.
            log.warning("Redis refused a command while serving %s: %s", request.path, exc)
            response = self._unavailable(ctx, f"Redis at {self._redis_name(ctx)}"
                                              f" refused the request: {exc}")
        if ctx.csrf_cookie is not None and response.mimetype == "text/html":
            response.set_cookie(
                CSRF_COOKIE, ctx.csrf_cookie, path=cookie_path(request), httponly=True,
                samesite="Strict", secure=request.is_secure,
            )
        if ctx.flash is not None and response.mimetype == "text/html":
            response.delete_cookie(FLASH_COOKIE, path=cookie_path(request))
        return self._secure(response)

    def _authenticate(self, request: Request) -> Response | None:
        if self.basic_auth is not None and not self.basic_auth.check(
            request.headers.get("Authorization")
        ):
            return Response(
                "Authentication required.\n", status=401, mimetype="text/plain",
                headers={"WWW-Authenticate":
                         f'Basic realm="{self.basic_auth.realm}", charset="UTF-8"'},
            )
        if self.auth is not None:
            try:
                allowed = bool(self.auth(request.environ))
            except Exception:
                log.exception("the web UI's auth hook raised; refusing the request")
                allowed = False
            if not allowed:
                return Response("Forbidden.\n", status=403, mimetype="text/plain")
        return None

    def _check_post(self, request: Request) -> None:
        if self.read_only:
            raise Forbidden("The web UI is read-only: actions are turned off.")
        refusal = self.csrf.refusal(request)
        if refusal is not None:
            raise Forbidden(refusal)

    def _secure(self, response: Response) -> Response:
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        if "Cache-Control" not in response.headers:
            response.headers["Cache-Control"] = "no-store"
        return response

    # -- rendering -----------------------------------------------------------------------

    def render(self, ctx: Ctx, template: str, status: int = 200, *, summary: bool = True,
               **values: Any) -> Response:
        """Render a page; ``summary`` adds the stats bar (one cheap round trip pair; with
        shards, summed over the shards that answer)."""
        page = self.env.get_template(template)
        states = ctx.shard_states()
        if not summary:
            totals = None
        elif self.shards is not None:
            totals = self.shards.stats(ctx.up())
        else:
            totals = self.api.stats()
        context: dict[str, Any] = dict(
            url_for=ctx.url_for,
            static=lambda name: self.static_url(ctx, name),
            csrf_field=CSRF_FIELD,
            csrf_token=ctx.csrf,
            here=ctx.here(),
            endpoint=ctx.endpoint,
            read_only=self.read_only,
            open_warning=self.open_warning,
            flash=ctx.flash,
            title=self.title,
            version=__version__,
            redis_url=self._redis_name(ctx),
            namespace=self.api.config.namespace,
            now=time.time(),
            summary=totals,
            sharded=self.shards is not None,
            shard_states=states,
            shards_down=[state for state in states if not state.up],
            current_shard=ctx.shard,
            poll_interval=self.poll_interval,
            action_labels=ACTION_LABELS,
        )
        context.update(values)
        return Response(page.render(context), status=status, mimetype="text/html")

    def _redis_name(self, ctx: Ctx) -> str:
        """The Redis a page reads: its URL, or with shards the shard's (or how many)."""
        if self.shards is None:
            return safe_url(self.api.config.redis_url)
        if ctx.shard is not None:
            return f"shard {ctx.shard}: {safe_url(self.shards.config.shards[ctx.shard])}"
        return f"{len(self.shards.apis)} shards"

    def static_url(self, ctx: Ctx, name: str) -> str:
        """URL of a static file, with a digest of its content so browsers may cache it."""
        body = self.static_files[name][0]
        return ctx.url_for("static", name=name, v=hashlib.sha256(body).hexdigest()[:10])

    def _redirect(self, ctx: Ctx, exc: Redirect) -> Response:
        response = Response(status=303, headers={"Location": exc.location})
        response.set_cookie(
            FLASH_COOKIE, exc.cookie_value(),
            path=cookie_path(ctx.request), httponly=True, samesite="Strict",
            secure=ctx.request.is_secure, max_age=60,
        )
        return response

    def _error(self, ctx: Ctx, exc: HTTPException) -> Response:
        code = exc.code or 500
        if code in (301, 302, 307, 308):  # strict-slash redirects from the router
            return exc.get_response(ctx.request.environ)
        if ctx.request.accept_mimetypes.best == "application/json" or (
            ctx.request.path.endswith(".json")
        ):
            return Response(json.dumps({"error": exc.description}), status=code,
                            mimetype="application/json")
        response = self.render(ctx, "error.html", status=code, summary=False,
                               code=code, name=exc.name, description=exc.description)
        if code == 405 and hasattr(exc, "valid_methods") and exc.valid_methods:
            response.headers["Allow"] = ", ".join(exc.valid_methods)
        return response

    def _unavailable(self, ctx: Ctx, message: str) -> Response:
        if ctx.request.path.endswith((".json", "/metrics")):
            return Response(message + "\n", status=503, mimetype="text/plain")
        return self.render(ctx, "error.html", status=503, summary=False, code=503,
                           name="Redis unavailable", description=message)


def normalize_prefix(prefix: str | None) -> str:
    """``rfetch/`` -> ``/rfetch``; ``/`` and empty -> ``""``."""
    text = (prefix or "").strip().strip("/")
    return f"/{text}" if text else ""


def _load_static() -> dict[str, tuple[bytes, str]]:
    found: dict[str, tuple[bytes, str]] = {}
    for entry in resources.files("rfetch.web").joinpath("static").iterdir():
        if entry.is_file() and not entry.name.startswith("."):
            mimetype = mimetypes.guess_type(entry.name)[0] or "application/octet-stream"
            found[entry.name] = (entry.read_bytes(), mimetype)
    return found
