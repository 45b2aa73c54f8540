"""Authentication of the web UI (CSRF protection is :mod:`rfetch.web.csrf`).

* Authentication: optional HTTP basic auth (a user and password, e.g. from
  ``RFETCH_WEB_USER`` / ``RFETCH_WEB_PASSWORD``) and an optional hook, a callable that
  takes the WSGI environ and returns whether the request may go on (for a session of the
  host application, a header set by a proxy, a network check...). Both must pass.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

AuthHook = Callable[[dict[str, Any]], bool]
"""Takes the WSGI environ; True lets the request through, False answers 403."""

USER_ENV = "RFETCH_WEB_USER"
PASSWORD_ENV = "RFETCH_WEB_PASSWORD"


@dataclass(frozen=True)
class BasicAuth:
    """One user name and password for HTTP basic auth (compared in constant time)."""

    user: str
    password: str
    realm: str = "rfetch"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> BasicAuth | None:
        """From ``RFETCH_WEB_USER`` and ``RFETCH_WEB_PASSWORD``; None unless both are set.

        Raises:
            ValueError: only one of the two is set (a typo must not leave the UI open).
        """
        env = os.environ if environ is None else environ
        user, password = env.get(USER_ENV), env.get(PASSWORD_ENV)
        if not user and not password:
            return None
        if not user or not password:
            raise ValueError(f"set both {USER_ENV} and {PASSWORD_ENV}, or neither")
        return cls(user, password)

    def check(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header holds these credentials."""
        if not header or header[:6].lower() != "basic ":
            return False
        try:
            decoded = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return False
        user, sep, password = decoded.partition(":")
        if not sep:
            return False
        # Both compared, whatever the first gives, so timing says nothing about which failed.
        ok_user = hmac.compare_digest(user.encode(), self.user.encode())
        ok_password = hmac.compare_digest(password.encode(), self.password.encode())
        return ok_user and ok_password
