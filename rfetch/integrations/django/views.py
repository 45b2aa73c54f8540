"""The web UI as a Django view: the WSGI app called with the request's environ."""

from __future__ import annotations

import hmac
import io
import sys
from collections.abc import Iterable
from typing import Any

from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from rfetch.integrations.django.apps import app_config


@csrf_exempt  # rfetch's pages carry their own CSRF token and check the origin themselves
def web_ui(request: HttpRequest, subpath: str = "") -> HttpResponse:
    """Serve ``subpath`` of the web UI to staff users; others go to the login page
    (``RFETCH["web"]["login_url"]``, default ``admin:login``).

    ``/metrics`` is the exception: Prometheus scrapes without a Django session, so it
    answers a GET without login, or, when ``RFETCH["web"]["metrics_token"]`` is set, a
    GET with ``Authorization: Bearer <token>`` (401 otherwise)."""
    options = app_config().options
    if subpath == "metrics" and request.method in ("GET", "HEAD"):
        if options.metrics_token is not None and not _bearer_matches(
            request, options.metrics_token
        ):
            denied = HttpResponse("metrics: a bearer token is required\n", status=401)
            denied["WWW-Authenticate"] = 'Bearer realm="rfetch metrics"'
            return denied
        return _forward(request, subpath)
    guarded = staff_member_required(_forward, login_url=options.login_url)
    response: HttpResponse = guarded(request, subpath)
    return response


def _bearer_matches(request: HttpRequest, token: str) -> bool:
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip(), token)


def _forward(request: HttpRequest, subpath: str) -> HttpResponse:
    mount = request.path[: len(request.path) - len(subpath)].rstrip("/")
    environ: dict[str, Any] = {k: v for k, v in request.META.items() if isinstance(v, str)}
    body = request.body
    environ.update({
        # The host as Django sees it (USE_X_FORWARDED_HOST, ALLOWED_HOSTS): the origin check
        # of rfetch's CSRF protection compares a browser's Origin with it.
        "HTTP_HOST": request.get_host(),
        "SCRIPT_NAME": mount,
        "PATH_INFO": "/" + subpath,
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.url_scheme": request.scheme,
        "wsgi.version": (1, 0),
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    })
    started: list[Any] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        started[:] = [status, headers]
        return lambda data: None

    result: Iterable[bytes] = app_config().web_app()(environ, start_response)
    try:
        content = b"".join(result)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    status, headers = started
    response = HttpResponse(content, status=int(status.split(" ", 1)[0]))
    for name, value in headers:
        if name.lower() == "set-cookie":
            response.cookies.load(value)  # one header per cookie, as Django writes them
        else:
            response[name] = value
    return response
