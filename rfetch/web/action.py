"""What a view works with while it answers one request (Sidekiq's ``web/action.rb``): the
request, URL building, rendering, the redirect target of a form, flash messages, and the
exceptions a view raises to answer otherwise than with a page."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from werkzeug.exceptions import HTTPException
from werkzeug.routing import MapAdapter
from werkzeug.wrappers import Request, Response

if TYPE_CHECKING:
    from rfetch.api import Api
    from rfetch.api.shards import ShardState

    from .application import WebApp

WSGIEnviron = dict[str, Any]
StartResponse = Callable[..., Any]

FLASH_COOKIE = "rfetch_flash"
FLASH_LIMIT = 400
"""Longest flash message kept, characters."""

MAX_NEXT_LENGTH = 2000
"""Longest ``next`` redirect target followed, characters."""


@dataclass
class Ctx:
    """One request as a view sees it.

    Attributes:
        app: the application (its API, settings and templates).
        request: the request.
        urls: the routing table bound to this request (``url_for``).
        csrf: the CSRF token of this page's forms (:mod:`rfetch.web.csrf`).
        csrf_cookie: the ``rfetch_csrf`` cookie value this response sets (a browser
            that had none), or None.
        flash: the message of the previous action, as ``(kind, text)``.
        endpoint: the name of the matched route.
        shard: with shards, the index of the shard this request's page or action is on,
            once :attr:`api` or :meth:`queue_api` chose it (None on a merged page).
    """

    app: WebApp
    request: Request
    urls: MapAdapter
    csrf: str
    csrf_cookie: str | None
    flash: tuple[str, str] | None
    endpoint: str = ""
    shard: int | None = None
    _states: list[ShardState] | None = None

    @property
    def api(self) -> Api:
        """The admin API; with shards, the API of the shard named by the request's
        ``shard`` value (query or form), else of the first shard.

        Raises:
            BadRequest: a ``shard`` that is not the index of a shard.
        """
        return self._shard_api(0)

    def queue_api(self, queue: str) -> Api:
        """The API of the shard that holds ``queue``: the request's ``shard`` value, else
        the queue's own shard (``shard_map`` or the hash of its name)."""
        shards = self.app.shards
        return self._shard_api(0 if shards is None else shards.shard_of(queue))

    def _shard_api(self, default: int) -> Api:
        shards = self.app.shards
        if shards is None:
            return self.app.api
        raw = (self.request.values.get("shard") or "").strip()
        index = default
        if raw:
            if not raw.isdigit() or int(raw) >= len(shards.apis):
                raise BadRequest(f"no shard {raw!r}: shards are 0 to {len(shards.apis) - 1}")
            index = int(raw)
        self.shard = index
        return shards.shard(index)

    @property
    def sharded(self) -> bool:
        """Whether the UI reads several shards (``Config.shards``)."""
        return self.app.shards is not None

    def shard_states(self) -> list[ShardState]:
        """Which shards answer, asked once per request (empty without shards)."""
        if self.app.shards is None:
            return []
        if self._states is None:
            self._states = self.app.shards.states()
        return self._states

    def up(self) -> list[int]:
        """Indexes of the shards that answer: the ones a merged page reads."""
        return [state.index for state in self.shard_states() if state.up]

    def url_for(self, endpoint: str, **values: Any) -> str:
        """The URL of a route (with ``SCRIPT_NAME``); extra values become the query."""
        return self.urls.build(endpoint, values)

    def render(self, template: str, status: int = 200, *, summary: bool = True,
               **values: Any) -> Response:
        """Render ``template`` (see :meth:`WebApp.render`)."""
        return self.app.render(self, template, status, summary=summary, **values)

    def here(self) -> str:
        """This page's path and query, relative to the app (a form's ``next``)."""
        query = self.request.query_string.decode("latin-1")
        return self.request.path + (f"?{query}" if query else "")

    def back(self, default: str) -> str:
        """Where a POST redirects: the form's ``next`` when it is a path of this app,
        else ``default``.

        ``next`` is client input: anything but a plain absolute path (a scheme, ``//host``,
        a backslash, a control character or space that browsers drop or read as a
        separator, or an overlong value) falls back to ``default``, so it can neither lead
        off-site nor break the ``Location`` header.
        """
        target = self.request.form.get("next", "")
        if not is_local_path(target):
            return default
        return self.request.script_root + target


def is_local_path(target: str) -> bool:
    """Whether ``target`` is a path of this site that every browser reads the same way: it
    starts with one ``/``, and holds no backslash, whitespace or control character."""
    if not target.startswith("/") or len(target) > MAX_NEXT_LENGTH:
        return False
    if target.startswith("//") or "\\" in target:
        return False
    return all(ch.isprintable() and not ch.isspace() for ch in target)


class Redirect(Exception):
    """Raised by a view to answer 303 with a flash message.

    Args:
        location: the redirect target (a URL of this app).
        message: the flash message shown on the next page.
        kind: ``ok``, ``warn`` or ``error``.
    """

    def __init__(self, location: str, message: str, kind: str = "ok") -> None:
        super().__init__(message)
        self.location = location
        self.message = message
        self.kind = kind

    def cookie_value(self) -> str:
        """The flash cookie's value (URL-quoted, cut to :data:`FLASH_LIMIT`)."""
        return quote(f"{self.kind}:{self.message[:FLASH_LIMIT]}")


class Forbidden(HTTPException):
    """403 with a description saying why."""

    code = 403
    description = "Forbidden."

    def __init__(self, description: str) -> None:
        super().__init__(description)


class BadRequest(HTTPException):
    """400 with a description saying what is wrong with the request."""

    code = 400

    def __init__(self, description: str) -> None:
        super().__init__(description)


def cookie_path(request: Request) -> str:
    """The path of the app's cookies (its mount point)."""
    return request.script_root or "/"


def read_flash(request: Request) -> tuple[str, str] | None:
    """The flash message of the previous action, or None (cookies are client input)."""
    raw = request.cookies.get(FLASH_COOKIE)
    if not raw:
        return None
    kind, _, message = unquote(raw).partition(":")
    if kind not in ("ok", "warn", "error") or not message:
        return None
    return kind, message[:FLASH_LIMIT]
