"""A second origin for the CSRF tests: a real HTTP server on another port of 127.0.0.1,
whose page plants its own ``rfetch_csrf`` cookie and holds a form that posts an action to
the web UI. Another port of the same host is the same *site* (cookies and ``SameSite``
ignore ports), so a browser sends the planted cookie to the UI, before the real one when
its path is longer."""

from __future__ import annotations

import html
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PLANTED = "planted" + "x" * 40
"""The attacker's cookie value: well formed, so a plain double-submit check takes it."""

DELETE_ALL_DEAD = {"scope": "matching", "class": "", "grep": "", "action": "delete"}
"""The form fields of "delete every job of the dead set"."""


class AttackerSite:
    """The server, started at once on a free port; :meth:`close` stops it.

    Args:
        target: the web UI's URL (``http://127.0.0.1:PORT``); the form posts to
            ``<target>/dead``.
        cookie_path: the planted cookie's path (longer than the UI's ``/``).
        auto_submit: the page submits its form as soon as it loads (inline script).
    """

    def __init__(self, target: str, cookie_path: str = "/dead",
                 auto_submit: bool = False) -> None:
        fields = {"csrf_token": PLANTED, **DELETE_ALL_DEAD}
        inputs = "".join(f'<input name="{k}" value="{html.escape(v)}">' for k, v in fields.items())
        script = "<script>document.forms[0].submit()</script>" if auto_submit else ""
        page = (f'<html><body><form method="post" action="{target}/dead">{inputs}'
                f'<button>Win a prize</button></form>{script}</body></html>').encode()
        cookie = f"rfetch_csrf={PLANTED}; Path={cookie_path}"

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Set-Cookie", cookie)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)
