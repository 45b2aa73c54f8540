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
        csrf: this client's CSRF token; ``new_csrf`` when it is set by this response.
        flash: the message of the previous action, as ``(kind, text)``.
        endpoint: the name of the matched route.
    """

    app: WebApp
    request: Request
    urls: MapAdapter
    csrf: str
    new_csrf: bool
    flash: tuple[str, str] | None
    endpoint: str = ""

    @property
    def api(self) -> Api:
        """The admin API."""
        return self.app.api

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
