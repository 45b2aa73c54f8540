"""``rfetch web``: serve the UI with waitress, a production-grade pure-Python WSGI server."""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable
from typing import Any

from .application import MAX_BODY_BYTES

log = logging.getLogger("rfetch.web")

DEFAULT_BIND = "127.0.0.1:7433"


def parse_bind(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[IPv6]:PORT``, or ``PORT`` alone (host 127.0.0.1).

    Raises:
        ValueError: not of that form, or a port outside 0-65535.
    """
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = "127.0.0.1", text
    host = host.strip("[]") or "127.0.0.1"
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"expected HOST:PORT, got {text!r}") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"port out of range in {text!r}")
    return host, port


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or name from ``--bind``) only takes connections from
    this machine: a loopback address or ``localhost``. ``0.0.0.0``, ``::`` and any other
    name or address reach beyond it."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def make_server(app: Any, host: str, port: int, threads: int = 8) -> Any:
    """A waitress server bound to ``host:port`` (port 0: any free port), not yet running.

    ``server.effective_port`` is the bound port; ``server.run()`` serves until
    ``server.close()``; waitress answers TERM/INT by stopping (see :func:`serve`).
    """
    from waitress.server import create_server

    return create_server(
        app,
        host=host,
        port=port,
        threads=threads,
        ident="rfetch",
        clear_untrusted_proxy_headers=True,
        channel_timeout=60,
        # Bodies are refused by the app beyond its limit; waitress need not buffer more.
        max_request_body_size=MAX_BODY_BYTES,
    )


def server_urls(server: Any) -> list[str]:
    """``http://host:port`` of each socket a waitress server listens on."""
    servers = getattr(server, "map", None)
    found = [server] if hasattr(server, "effective_port") else list((servers or {}).values())
    urls = []
    for one in found:
        host = str(getattr(one, "effective_host", ""))
        port = getattr(one, "effective_port", None)
        if port is None:
            continue
        urls.append(f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}")
    return urls


def serve(
    app: Any,
    host: str,
    port: int,
    threads: int = 8,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve ``app`` until interrupted (INT or TERM)."""
    import signal

    server = make_server(app, host, port, threads)
    if on_ready is not None:
        on_ready(", ".join(server_urls(server)))

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
