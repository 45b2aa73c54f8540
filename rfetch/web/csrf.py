"""CSRF protection of the web UI: every action is a POST, and a POST goes through only when
it passes both checks below.

* **Where it comes from.** ``Sec-Fetch-Site``, which current browsers send over HTTPS and
  to localhost and no page can forge, must be ``same-origin`` or ``none`` (a request the
  user made: typed, a bookmark). ``same-site`` (a page of another port of the same host,
  or of a sibling subdomain) and ``cross-site`` are refused. Without it (an older browser,
  plain HTTP to another host), the ``Origin`` a browser sends with a POST is checked: its
  host must be this server's (the ``Host`` header as the WSGI server, or Werkzeug's
  ``ProxyFix`` behind a proxy, gives it); ``null`` and any other host are refused. An
  origin in ``trusted_origins`` is let through whatever the browser says. A request with
  neither header (curl, a script) is judged by its token alone. This is the rule of Go's
  ``net/http`` ``CrossOriginProtection``: the browser's own verdict first, so a proxy that
  rewrites ``Host`` breaks nothing for current browsers over HTTPS.
* **A token bound to the server.** The ``rfetch_csrf`` cookie holds a random value per
  browser (256 bits, ``HttpOnly``, ``SameSite=Strict``, path = the mount point); each form
  carries its HMAC-SHA256 under the server's secret key (itsdangerous' ``Signer``, as
  Flask-WTF signs its tokens). A page of another port or a sibling subdomain can plant a
  cookie of that name (with a longer path, so the browser sends it first), but without the
  key it cannot compute the token of the value it planted. Every ``rfetch_csrf`` cookie the
  browser sends is tried, so the planted one does not lock out the real page either.

The secret key is ``create_app(secret_key=...)``, else ``RFETCH_WEB_SECRET_KEY``, else
Django's ``SECRET_KEY`` when mounted through the Django integration, else random bytes
drawn when the app is built: tokens then stop working when the process restarts (a page
open across a restart asks to be reloaded) and are not valid on another web process
behind the same load balancer.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from itsdangerous import Signer
from werkzeug.wrappers import Request

CSRF_COOKIE = "rfetch_csrf"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRF-Token"
SECRET_ENV = "RFETCH_WEB_SECRET_KEY"
MIN_SECRET_LENGTH = 16
"""Shortest secret key accepted, characters (or bytes)."""

SALT = "rfetch.web.csrf"
"""itsdangerous salt: the key signs nothing else, even where it is Django's SECRET_KEY."""

ALLOWED_FETCH_SITES = frozenset({"same-origin", "none"})
_SESSION = re.compile(r"[A-Za-z0-9_-]{32,128}")
_MAX_TOKEN = 128
_ORIGIN = re.compile(r"(https?)://(\*\.)?([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?")


class CsrfGuard:
    """The two CSRF checks of a POST, and the tokens of the forms.

    Args:
        secret_key: the key tokens are signed with (str or bytes, at least
            :data:`MIN_SECRET_LENGTH` long); keep it secret, share it between the web
            processes of one deployment.
        trusted_origins: origins allowed to post whatever the browser says of them, as
            ``scheme://host[:port]``; ``scheme://*.example.com`` allows every subdomain of
            ``example.com`` (Django's ``CSRF_TRUSTED_ORIGINS`` form).
        ephemeral: the key was drawn at random for this process (tokens do not outlive it).

    Raises:
        ValueError: a key too short, or trusted origins given as one string or not of
            that form.
    """

    def __init__(self, secret_key: str | bytes, trusted_origins: Iterable[str] = (),
                 *, ephemeral: bool = False) -> None:
        if len(secret_key) < MIN_SECRET_LENGTH:
            raise ValueError(
                f"the web UI's secret key ({SECRET_ENV}) must be at least "
                f"{MIN_SECRET_LENGTH} characters long"
            )
        if isinstance(trusted_origins, str):
            raise ValueError("trusted_origins takes a list of origins, not one string")
        self._signer = Signer(secret_key, salt=SALT, digest_method=hashlib.sha256)
        self.trusted_origins = tuple(_parse_origin(o) for o in trusted_origins)
        self.ephemeral = ephemeral

    @classmethod
    def from_settings(cls, secret_key: str | bytes | None = None,
                      trusted_origins: Iterable[str] = (),
                      environ: Mapping[str, str] | None = None) -> CsrfGuard:
        """``secret_key``, else ``RFETCH_WEB_SECRET_KEY``, else a random per-process key.

        Raises:
            ValueError: as :class:`CsrfGuard`.
        """
        env = os.environ if environ is None else environ
        key = secret_key if secret_key is not None else env.get(SECRET_ENV) or None
        if key is None:
            return cls(secrets.token_bytes(32), trusted_origins, ephemeral=True)
        return cls(key, trusted_origins)

    def session(self, request: Request) -> tuple[str, bool]:
        """This browser's CSRF value: the first well-formed ``rfetch_csrf`` cookie, else a
        fresh one (then True: the response must set it)."""
        for value in request.cookies.getlist(CSRF_COOKIE):
            if _SESSION.fullmatch(value):
                return value, False
        return secrets.token_urlsafe(32), True

    def token(self, session: str) -> str:
        """The token the forms carry for the cookie value ``session``."""
        return self._signer.get_signature(session).decode("ascii")

    def refusal(self, request: Request) -> str | None:
        """Why a POST must be refused, or None when it passes both checks."""
        origin = request.headers.get("Origin")
        if origin is None or not self._trusted(origin):
            site = request.headers.get("Sec-Fetch-Site", "").strip().lower()
            if site and site not in ALLOWED_FETCH_SITES:
                return (f"Request from another site refused (the browser says "
                        f"Sec-Fetch-Site: {site}).")
            if not site and origin is not None and not _same_host(origin, request.host):
                return (f"Request from {origin} refused: this UI answers as "
                        f"{request.host}. Behind a proxy, pass the Host header on (or "
                        "use Werkzeug's ProxyFix), or trust that origin.")
        if not self._token_ok(request):
            return ("Missing or invalid CSRF token. Reload the page and try again "
                    "(cookies must be enabled).")
        return None

    def _token_ok(self, request: Request) -> bool:
        submitted = request.form.get(CSRF_FIELD) or request.headers.get(CSRF_HEADER)
        if not submitted or len(submitted) > _MAX_TOKEN:
            return False
        return any(
            self._signer.verify_signature(value, submitted)
            for value in request.cookies.getlist(CSRF_COOKIE)
            if _SESSION.fullmatch(value)
        )

    def _trusted(self, origin: str) -> bool:
        parsed = _split_origin(origin)
        if parsed is None:
            return False
        scheme, host = parsed
        for t_scheme, t_host in self.trusted_origins:
            if scheme != t_scheme:
                continue
            if t_host.startswith("*.") and host.endswith(t_host[1:]):
                return True
            if host == t_host:
                return True
        return False


def _split_origin(origin: str) -> tuple[str, str] | None:
    """``(scheme, host[:port])`` of an ``Origin`` header, lowercased; None for ``null`` or
    anything that is not an http(s) origin."""
    try:
        parts = urlsplit(origin.strip())
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path:
        return None
    return parts.scheme, parts.netloc.lower()


def _same_host(origin: str, host: str) -> bool:
    parsed = _split_origin(origin)
    return parsed is not None and parsed[1] == host.lower()


def _parse_origin(text: str) -> tuple[str, str]:
    """A trusted origin as ``(scheme, host[:port])``.

    Raises:
        ValueError: not ``http(s)://host[:port]`` or ``http(s)://*.domain[:port]``.
    """
    match = _ORIGIN.fullmatch(text.strip())
    if match is None:
        raise ValueError(
            f"trusted origin {text!r} is not of the form https://host[:port] "
            "(or https://*.example.com)"
        )
    scheme, wildcard, host, port = match.groups()
    return scheme, f"{wildcard or ''}{host}{port or ''}".lower()
