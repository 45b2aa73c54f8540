"""CSRF, basic auth, the auth hook, read-only mode, escaping and security headers."""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis
from werkzeug.test import Client

from rfetch.api import Api
from rfetch.web import BasicAuth, WebApp, create_app
from rfetch.web.formatting import entry_key
from tests.support.seed import jid_of
from tests.support.web import IDENTITY, XSS, add_process, failed, payload, post, text, token_of

PAGES = ("/", "/busy", "/queues", "/queues/default", "/retries", "/scheduled", "/dead",
         "/classes", "/explain", f"/explain?jid={jid_of(1)}")


def basic(user: str, password: str) -> dict[str, str]:
    raw = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {raw}"}


@pytest.fixture
def retry_job(r: redis.Redis, api: Api) -> str:
    r.zadd("retry", {failed(jid_of(1)): 1000})
    return entry_key(api.retries.page().jobs[0])


# -- CSRF --------------------------------------------------------------------------------


def test_post_without_a_valid_token_is_refused(client: Client, r: redis.Redis,
                                                retry_job: str) -> None:
    form = {"single": f"retry:{retry_job}"}
    token = token_of(client, "/retries")
    assert client.post("/retries", data=form).status_code == 403  # no token
    assert post(client, "/retries", form, token="x" * 43).status_code == 403  # wrong token
    response = post(client, "/retries", form, token="")
    assert response.status_code == 403
    assert "CSRF" in text(response)
    fresh = Client(client.application)  # a token without its cookie (another browser)
    assert post(fresh, "/retries", form, token=token).status_code == 403
    assert r.zcard("retry") == 1 and not r.exists("queue:default")
    # The token also travels in a header (for scripts).
    response = client.post("/retries", data=form, headers={"X-CSRF-Token": token})
    assert response.status_code == 303
    assert r.zcard("retry") == 0


def test_cross_site_post_is_refused_even_with_a_token(client: Client, r: redis.Redis,
                                                      retry_job: str) -> None:
    response = post(client, "/retries", {"single": f"retry:{retry_job}"}, page="/retries",
                    headers={"Sec-Fetch-Site": "cross-site"})
    assert response.status_code == 403
    assert r.zcard("retry") == 1


@pytest.mark.parametrize("headers", [
    {"Sec-Fetch-Site": "same-site"},
    {"Sec-Fetch-Site": "same-site", "Origin": "http://localhost:8000"},
    {"Origin": "http://localhost:8000"},
    {"Origin": "http://evil.example"},
    {"Origin": "null"},
])
def test_a_post_from_another_origin_is_refused_even_with_a_token(
    client: Client, r: redis.Redis, retry_job: str, headers: dict[str, str]
) -> None:
    """Another port of the host or a sibling subdomain is the same site, not the same origin."""
    response = post(client, "/retries", {"single": f"retry:{retry_job}"}, page="/retries",
                    headers=headers)
    assert response.status_code == 403
    assert "refused" in text(response)
    assert r.zcard("retry") == 1


@pytest.mark.parametrize("headers", [
    {"Sec-Fetch-Site": "same-origin", "Origin": "http://localhost"},
    {"Sec-Fetch-Site": "none"},
    {"Origin": "http://localhost"},  # an older browser, on the UI's own host
    # The browser's verdict wins over a Host rewritten by a proxy (Go's rule).
    {"Sec-Fetch-Site": "same-origin", "Origin": "https://jobs.example.com"},
])
def test_a_post_from_the_ui_itself_is_let_through(
    client: Client, r: redis.Redis, retry_job: str, headers: dict[str, str]
) -> None:
    response = post(client, "/retries", {"single": f"retry:{retry_job}"}, page="/retries",
                    headers=headers)
    assert response.status_code == 303, text(response)[:500]
    assert r.zcard("retry") == 0


def test_trusted_origins(make_app: Callable[..., WebApp], r: redis.Redis, api: Api) -> None:
    client = Client(make_app(trusted_origins=["https://admin.example.com",
                                              "https://*.ops.example.com"]))
    for origin, allowed in (("https://admin.example.com", True),
                            ("https://a.ops.example.com", True),
                            ("http://admin.example.com", False),
                            ("https://ops.example.com", False),
                            ("https://evil.example.com", False)):
        r.zadd("retry", {failed(jid_of(1)): 1})
        key = entry_key(api.retries.page().jobs[0])
        response = post(client, "/retries", {"single": f"delete:{key}"}, page="/retries",
                        headers={"Sec-Fetch-Site": "same-site", "Origin": origin})
        assert response.status_code == (303 if allowed else 403), origin
        assert r.zcard("retry") == (0 if allowed else 1), origin
        r.delete("retry")
    with pytest.raises(ValueError, match="not of the form"):
        make_app(trusted_origins=["admin.example.com"])
    with pytest.raises(ValueError, match="not one string"):
        make_app(trusted_origins="https://admin.example.com")


def test_tokens_are_bound_to_the_secret_key(
    make_app: Callable[..., WebApp], monkeypatch: pytest.MonkeyPatch, r: redis.Redis,
    retry_job: str,
) -> None:
    """A token is the HMAC of the cookie under the key: the cookie's own value is no token,
    a token made under another key is refused, and web processes sharing the key (given, or
    from RFETCH_WEB_SECRET_KEY) accept each other's tokens."""
    form = {"single": f"retry:{retry_job}"}
    one = Client(make_app(secret_key="k" * 32))
    token = token_of(one, "/retries")
    cookie = one.get_cookie("rfetch_csrf")
    assert cookie is not None and token != cookie.value
    assert post(one, "/retries", form, token=cookie.value).status_code == 403

    other = Client(make_app(secret_key="o" * 32))  # same cookie, another key
    other.set_cookie("rfetch_csrf", cookie.value)
    assert post(other, "/retries", form, token=token).status_code == 403
    assert r.zcard("retry") == 1

    monkeypatch.setenv("RFETCH_WEB_SECRET_KEY", "k" * 32)
    twin = Client(make_app())  # another process of the deployment
    twin.set_cookie("rfetch_csrf", cookie.value)
    assert post(twin, "/retries", form, token=token).status_code == 303
    assert r.zcard("retry") == 0

    with pytest.raises(ValueError, match="at least 16"):
        make_app(secret_key="short")
    assert not make_app().csrf.ephemeral
    monkeypatch.delenv("RFETCH_WEB_SECRET_KEY")
    assert make_app().csrf.ephemeral


def test_every_page_names_its_token_for_scripts(client: Client) -> None:
    body = text(client.get("/"))
    token = re.search(r'<meta name="csrf-token" content="([^"]+)">', body)
    assert token is not None and token.group(1) == token_of(client, "/retries")


def test_csrf_cookie_is_http_only_and_same_site(client: Client) -> None:
    response = client.get("/")
    cookie = response.headers["Set-Cookie"]
    assert cookie.startswith("rfetch_csrf=")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    token = client.get_cookie("rfetch_csrf")
    assert token is not None and len(token.value) >= 43
    assert "Set-Cookie" not in client.get("/").headers  # kept once set


def test_a_get_never_changes_state(client: Client, r: redis.Redis, retry_job: str) -> None:
    add_process(r)
    r.sadd("queues", "default")
    r.lpush("queue:default", payload(jid_of(5)))
    for path in (f"/retries?single=retry:{retry_job}&action=retry&scope=matching",
                 f"/retries/{retry_job}?action=delete",
                 "/queues/default?action=pause", "/queues/default?action=clear",
                 f"/busy?action=stop&identity={IDENTITY}&all=1"):
        assert client.get(path).status_code in (200, 404)
    assert r.zcard("retry") == 1
    assert r.llen("queue:default") == 1
    assert not r.exists("paused")
    assert not r.exists(f"{IDENTITY}-signals")


def test_every_form_posts_with_a_token(client: Client, r: redis.Redis, retry_job: str) -> None:
    add_process(r)
    r.sadd("queues", "default")
    r.lpush("queue:default", payload(jid_of(5)))
    r.zadd("dead", {failed(jid_of(6)): 1})
    r.zadd("schedule", {payload(jid_of(7)): time.time() + 60})
    for path in (*PAGES, f"/retries/{retry_job}"):
        body = text(client.get(path))
        for form in re.findall(r"<form[^>]*method=\"post\".*?</form>", body, re.S):
            assert 'name="csrf_token"' in form, (path, form[:200])


# -- authentication ----------------------------------------------------------------------


def test_basic_auth(make_app: Callable[..., WebApp]) -> None:
    client = Client(make_app(basic_auth=("admin", "s3cret:pw")))
    response = client.get("/")
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith('Basic realm="rfetch"')
    assert client.get("/", headers=basic("admin", "wrong")).status_code == 401
    assert client.get("/", headers=basic("root", "s3cret:pw")).status_code == 401
    assert client.get("/", headers={"Authorization": "Basic !!!"}).status_code == 401
    assert client.get("/", headers={"Authorization": "Bearer x"}).status_code == 401
    assert client.get("/", headers=basic("admin", "s3cret:pw")).status_code == 200
    assert client.get("/metrics").status_code == 401
    assert client.get("/static/rfetch.css").status_code == 401
    assert client.get("/metrics", headers=basic("admin", "s3cret:pw")).status_code == 200


def test_basic_auth_from_env(monkeypatch: pytest.MonkeyPatch, config: Any,
                             r: redis.Redis) -> None:
    monkeypatch.setenv("RFETCH_WEB_USER", "ops")
    monkeypatch.setenv("RFETCH_WEB_PASSWORD", "pw")
    client = Client(create_app(config, redis=r))
    assert client.get("/").status_code == 401
    assert client.get("/", headers=basic("ops", "pw")).status_code == 200
    assert create_app(config, redis=r, basic_auth=False).basic_auth is None
    monkeypatch.delenv("RFETCH_WEB_PASSWORD")
    with pytest.raises(ValueError, match="RFETCH_WEB_PASSWORD"):
        create_app(config, redis=r)
    assert BasicAuth.from_env({}) is None


def test_auth_hook(make_app: Callable[..., WebApp], r: redis.Redis, api: Api) -> None:
    seen: list[dict[str, Any]] = []

    def only_admins(environ: dict[str, Any]) -> bool:
        seen.append(environ)
        return environ.get("HTTP_X_ROLE") == "admin"

    client = Client(make_app(auth=only_admins))
    assert client.get("/").status_code == 403
    assert client.get("/", headers={"X-Role": "admin"}).status_code == 200
    assert seen[-1]["PATH_INFO"] == "/"
    r.zadd("retry", {failed(jid_of(1)): 1})
    key = entry_key(api.retries.page().jobs[0])
    response = client.post("/retries", data={"single": f"delete:{key}"})
    assert response.status_code == 403  # the hook runs before anything else
    assert r.zcard("retry") == 1

    def broken(environ: dict[str, Any]) -> bool:
        raise RuntimeError("boom")

    assert Client(make_app(auth=broken)).get("/").status_code == 403


def test_basic_auth_and_hook_both_apply(make_app: Callable[..., WebApp]) -> None:
    client = Client(make_app(basic_auth=BasicAuth("a", "b"),
                             auth=lambda environ: environ.get("REMOTE_ADDR") == "10.0.0.1"))
    assert client.get("/", headers=basic("a", "b")).status_code == 403
    assert client.get("/", headers=basic("a", "b"),
                      environ_base={"REMOTE_ADDR": "10.0.0.1"}).status_code == 200
    assert client.get("/", environ_base={"REMOTE_ADDR": "10.0.0.1"}).status_code == 401


# -- read-only ---------------------------------------------------------------------------


def test_read_only_shows_no_button_and_refuses_actions(
    make_app: Callable[..., WebApp], r: redis.Redis, api: Api
) -> None:
    add_process(r)
    r.sadd("queues", "default")
    r.lpush("queue:default", payload(jid_of(5)))
    r.zadd("retry", {failed(jid_of(1)): 1})
    r.zadd("dead", {failed(jid_of(2)): 1})
    key = entry_key(api.retries.page().jobs[0])
    client = Client(make_app(read_only=True))
    for path in (*PAGES, f"/retries/{key}"):
        body = text(client.get(path))
        assert 'method="post"' not in body, path
        assert 'name="action"' not in body and 'name="single"' not in body, path
        assert 'type="checkbox"' not in body, path
    assert "read-only" in text(client.get("/"))
    token = token_of(client, "/retries")
    for path, form in (("/retries", {"single": f"retry:{key}"}),
                       (f"/retries/{key}", {"action": "delete"}),
                       ("/queues/default", {"action": "pause"}),
                       ("/queues/default", {"action": "clear"}),
                       ("/busy", {"action": "stop", "identity": IDENTITY})):
        response = post(client, path, form, token=token)
        assert response.status_code == 403, path
        assert "read-only" in text(response)
    assert r.zcard("retry") == 1 and r.llen("queue:default") == 1
    assert not r.exists("paused") and not r.exists(f"{IDENTITY}-signals")


# -- escaping ----------------------------------------------------------------------------


def test_args_and_errors_are_escaped_everywhere(client: Client, r: redis.Redis,
                                                api: Api) -> None:
    evil_class = "<img src=x onerror=alert(1)>"
    r.sadd("queues", "default", XSS)
    r.lpush("queue:default", payload(jid_of(1), evil_class, [XSS, {XSS: XSS}]))
    r.zadd("retry", {failed(jid_of(2), args=[XSS], error=XSS): 1})
    r.zadd("dead", {failed(jid_of(3), args=[XSS], error=XSS): 1})
    r.zadd("schedule", {payload(jid_of(4), args=[XSS]): time.time() + 60})
    add_process(r, running=[payload(jid_of(5), evil_class, [XSS])])
    key = entry_key(api.retries.page().jobs[0])
    paths = (*PAGES, f"/retries/{key}", f"/explain?jid={jid_of(2)}",
             f"/explain?jid={jid_of(1)}", f"/explain?jid={XSS}", f"/retries?grep={XSS}",
             f"/retries?class={XSS}")
    for path in paths:
        body = text(client.get(path))
        assert "<script>" not in body, path
        assert "<img src=x" not in body, path
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in text(client.get("/retries"))
    assert "&lt;img src=x onerror=alert(1)&gt;" in text(client.get("/busy"))
    # A flash message built from user input is escaped too.
    response = post(client, "/busy", {"action": "stop", "identity": XSS}, page="/busy")
    assert "<script>" not in text(client.get(response.headers["Location"]))


def test_security_headers(client: Client) -> None:
    for path in ("/", "/stats.json", "/metrics", "/nope"):
        headers = client.get(path).headers
        assert "default-src 'none'" in headers["Content-Security-Policy"], path
        assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
        assert headers["X-Frame-Options"] == "DENY"
        assert headers["X-Content-Type-Options"] == "nosniff"
    # No inline script or style: the CSP allows neither.
    body = text(client.get("/"))
    assert "<script>" not in body and "style=" not in body and "<style" not in body
    assert "onclick" not in body
