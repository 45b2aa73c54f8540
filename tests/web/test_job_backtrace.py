"""A job page shows the traceback stored with the ``backtrace`` option (Sidekiq's
``error_backtrace``, as Sidekiq's Web UI does), and nothing for a job without one."""

from __future__ import annotations

import redis
from werkzeug.test import Client

from rfetch.api import Api
from rfetch.web.formatting import entry_key
from rfetch.worker.retry import compress_backtrace
from tests.support.seed import jid_of
from tests.support.web import failed, text


def raised() -> BaseException:
    def charge_card() -> None:
        raise RuntimeError("declined")

    try:
        charge_card()
    except RuntimeError as exc:
        return exc
    raise AssertionError("unreachable")


def test_the_stored_backtrace_shows_on_the_job_page(
    client: Client, api: Api, r: redis.Redis
) -> None:
    stored = compress_backtrace(raised(), 20)
    r.zadd("dead", {failed(jid_of(1), error_backtrace=stored): 1000.5})
    r.zadd("dead", {failed(jid_of(2), error_backtrace="not base64 of zlib"): 1001.5})
    r.zadd("dead", {failed(jid_of(3)): 1002.5})
    with_trace, garbled, plain = api.dead.page(reverse=False).jobs
    assert with_trace.error_backtrace is not None
    assert "in `charge_card'" in with_trace.error_backtrace[0]
    assert garbled.error_backtrace is None and plain.error_backtrace is None
    body = text(client.get(f"/dead/{entry_key(with_trace)}"))
    assert "Backtrace" in body and "in `charge_card&#39;" in body
    for record in (garbled, plain):
        assert "Backtrace" not in text(client.get(f"/dead/{entry_key(record)}"))
