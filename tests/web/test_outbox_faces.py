"""The transactional outbox in the faces: the dashboard tile and /metrics (backlog, oldest
age, a database that does not answer), ``rfetch explain`` ("in the outbox, committed, not
yet relayed") and ``rfetch check`` with outbox thresholds."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from werkzeug.test import Client as WebClient

import rfetch
from rfetch.config import Config
from rfetch.push.client import Client
from rfetch.web import WebApp
from tests.support.outbox import sqlite_url

__all__ = ["sqlite_url"]


def one_row(url: str, config: Config) -> str:
    conn = sqlite3.connect(url.removeprefix("sqlite:///"))
    with rfetch.outbox.using(conn):
        jid = Client(config).push("app.Send", [1])
    conn.commit()
    assert jid is not None
    return jid


def rfetch_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rfetch.cli", *args], capture_output=True,
                          text=True, timeout=60)


def test_dashboard_and_metrics_show_the_backlog(
    make_app: Callable[..., WebApp], sqlite_url: str, config: Config
) -> None:
    one_row(sqlite_url, config)
    web = WebClient(make_app(outbox_database=sqlite_url))
    page = web.get("/").get_data(as_text=True)
    assert 'id="outbox-tile"' in page
    tile = page[page.index('id="outbox-tile"'):]
    assert '<span class="tile-value">1</span><span class="tile-label">Outbox</span>' in tile
    metrics = web.get("/metrics").get_data(as_text=True)
    assert "rfetch_outbox_up 1.0" in metrics
    assert "rfetch_outbox_backlog_jobs 1.0" in metrics
    assert "rfetch_outbox_oldest_age_seconds" in metrics


def test_an_unreachable_outbox_database_is_shown_not_raised(
    make_app: Callable[..., WebApp], tmp_path: Path
) -> None:
    web = WebClient(make_app(outbox_database=f"sqlite:///{tmp_path}/missing/dir/app.db"))
    response: Any = web.get("/")
    assert response.status_code == 200
    assert "database unreachable" in response.get_data(as_text=True)
    assert "rfetch_outbox_up 0.0" in web.get("/metrics").get_data(as_text=True)


def test_dashboard_without_an_outbox_has_no_tile(make_app: Callable[..., WebApp]) -> None:
    assert 'id="outbox-tile"' not in WebClient(make_app()).get("/").get_data(as_text=True)


def test_explain_and_check_see_the_outbox(sqlite_url: str, config: Config) -> None:
    jid = one_row(sqlite_url, config)
    explained = rfetch_cli("explain", jid, "--outbox-database", sqlite_url,
                           "--redis-url", config.redis_url)
    assert explained.returncode == 0, explained.stderr
    assert "in the outbox" in explained.stdout and "not yet relayed" in explained.stdout
    checked = rfetch_cli("check", "--outbox-database", sqlite_url, "--max-outbox-size", "0",
                         "--redis-url", config.redis_url)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "CRITICAL outbox backlog 1 row(s)" in checked.stdout
    fine = rfetch_cli("check", "--outbox-database", sqlite_url, "--max-outbox-size", "5",
                      "--redis-url", config.redis_url)
    assert fine.returncode == 0, fine.stdout + fine.stderr
    assert "OK outbox backlog 1 row(s)" in fine.stdout
