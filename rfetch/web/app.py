"""The web UI as a WSGI application (Werkzeug routing, Jinja2 templates).

Every figure and every action goes through :class:`rfetch.api.Api`; this module only reads
requests, calls the API and renders its answers. See ``docs/web.md``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import mimetypes
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import quote, unquote

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from redis.exceptions import RedisError
from werkzeug.datastructures import MultiDict
from werkzeug.exceptions import HTTPException, NotFound
from werkzeug.routing import Map, MapAdapter, Rule
from werkzeug.wrappers import Request, Response

from rfetch.api import (
    DEFAULT_MAX_SCAN,
    ActionResult,
    Api,
    JobFilter,
    JobRecord,
    JobSet,
    Page,
    ProcessNotFound,
)
from rfetch.version import __version__

from . import formatting as fmt
from .security import (
    CSRF_COOKIE,
    CSRF_FIELD,
    CSRF_HEADER,
    AuthHook,
    BasicAuth,
    csrf_ok,
    new_csrf_token,
    valid_token_format,
)

log = logging.getLogger("rfetch.web")

WSGIEnviron = dict[str, Any]
StartResponse = Callable[..., Any]

PAGE_SIZES = (25, 50, 100, 200)
HISTORY_DAYS = (7, 30, 90)
CLASS_WINDOWS = (5, 15, 60, 120)
CLASS_COUNT_SCAN = 10_000
"""Entries examined per queue or set when counting jobs per class."""
FLASH_COOKIE = "rfetch_flash"
KEYS_BLOCKED_SCAN = 100_000
"""Retry-set entries examined when looking for blocked ordering keys on the keys page."""

SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
}


ACTION_LABELS = {
    "retry": "Retry now",
    "add_to_queue": "Add to queue",
    "delete": "Delete",
    "kill": "Kill",
}


@dataclass(frozen=True)
class SetKind:
    """One of the three sorted-set pages.

    Attributes:
        actions: what the page offers, in button order (the API's names).
        labels: button labels, by action.
    """

    slug: str
    title: str
    when: str
    default_order: str
    empty: str
    actions: tuple[str, ...]
    labels: dict[str, str]


SET_KINDS = {
    "retries": SetKind("retries", "Retries", "Next retry", "asc",
                       "No failed job is waiting for a retry.",
                       ("retry", "add_to_queue", "delete", "kill"), ACTION_LABELS),
    # A scheduled job has not failed: "run now" pushes it unchanged (the CLI's
    # ``scheduled retry``), so the retry count is not touched.
    "scheduled": SetKind("scheduled", "Scheduled", "Runs at", "asc", "No job is scheduled.",
                         ("add_to_queue", "delete", "kill"),
                         {**ACTION_LABELS, "add_to_queue": "Run now"}),
    "dead": SetKind("dead", "Dead", "Died", "desc", "The dead set is empty.",
                    ("retry", "add_to_queue", "delete"), ACTION_LABELS),
}
ACTION_PAST = {
    "retry": "Retried",
    "add_to_queue": "Added to their queue",
    "delete": "Deleted",
    "kill": "Killed (moved to the dead set)",
}


@dataclass
class Ctx:
    """What one request's view needs."""

    request: Request
    urls: MapAdapter
    csrf: str
    new_csrf: bool
    flash: tuple[str, str] | None
    endpoint: str = ""

    def url_for(self, endpoint: str, **values: Any) -> str:
        return self.urls.build(endpoint, values)


class Redirect(Exception):
    """Raised by a view to answer 303 with a flash message."""

    def __init__(self, location: str, message: str, kind: str = "ok") -> None:
        super().__init__(message)
        self.location = location
        self.message = message
        self.kind = kind


class WebApp:
    """The WSGI application; build it with :func:`rfetch.web.create_app`.

    Args:
        api: the admin API (one client, shared by every request and thread).
        read_only: refuse every action (403) and show no action button.
        auth: a hook called with the WSGI environ; False answers 403.
        basic_auth: HTTP basic auth credentials, or None.
        prefix: a path the app is mounted under when the server does not set
            ``SCRIPT_NAME`` itself (``rfetch web --prefix /rfetch``); requests outside it
            get 404.
        poll_interval: seconds between polls of the dashboard's live chart.
        metrics_window: minutes of per-class figures in ``/metrics``.
        title: shown in the header and the page titles.
    """

    def __init__(
        self,
        api: Api,
        *,
        read_only: bool = False,
        auth: AuthHook | None = None,
        basic_auth: BasicAuth | None = None,
        prefix: str = "",
        poll_interval: float = 5.0,
        metrics_window: int = 5,
        title: str = "rfetch",
    ) -> None:
        self.api = api
        self.read_only = read_only
        self.auth = auth
        self.basic_auth = basic_auth
        self.prefix = normalize_prefix(prefix)
        self.poll_interval = poll_interval
        self.metrics_window = metrics_window
        self.title = title
        self._metrics_registry: Any = None
        self.url_map = Map(
            [
                Rule("/", endpoint="dashboard", methods=["GET"]),
                Rule("/stats.json", endpoint="stats_json", methods=["GET"]),
                Rule("/busy", endpoint="busy", methods=["GET"]),
                Rule("/busy", endpoint="busy_action", methods=["POST"]),
                Rule("/queues", endpoint="queues", methods=["GET"]),
                Rule("/queues/<path:name>", endpoint="queue", methods=["GET"]),
                Rule("/queues/<path:name>", endpoint="queue_action", methods=["POST"]),
                Rule("/<any(retries,scheduled,dead):kind>", endpoint="set_page",
                     methods=["GET"]),
                Rule("/<any(retries,scheduled,dead):kind>", endpoint="set_action",
                     methods=["POST"]),
                Rule("/<any(retries,scheduled,dead):kind>/<key>", endpoint="set_job",
                     methods=["GET"]),
                Rule("/<any(retries,scheduled,dead):kind>/<key>", endpoint="set_job_action",
                     methods=["POST"]),
                Rule("/classes", endpoint="classes", methods=["GET"]),
                Rule("/keys", endpoint="keys", methods=["GET"]),
                Rule("/keys", endpoint="keys_action", methods=["POST"]),
                Rule("/explain", endpoint="explain", methods=["GET"]),
                Rule("/metrics", endpoint="metrics", methods=["GET"]),
                Rule("/static/<name>", endpoint="static", methods=["GET"]),
            ],
            strict_slashes=False,
        )
        self.env = Environment(
            loader=PackageLoader("rfetch.web", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters.update(
            number=fmt.number, utc=fmt.utc, iso=fmt.iso, span=fmt.span,
            relative=fmt.relative, run_time=fmt.run_time, memory=fmt.memory,
            to_json=fmt.to_json, pretty=fmt.pretty, shorten=fmt.shorten,
            entry_key=fmt.entry_key, breakable=fmt.breakable,
        )
        self.static_files = _load_static()

    # -- WSGI ----------------------------------------------------------------------------

    def __call__(self, environ: WSGIEnviron, start_response: StartResponse) -> Iterable[bytes]:
        if self.prefix:
            path = environ.get("PATH_INFO", "") or "/"
            if path == self.prefix or path.startswith(self.prefix + "/"):
                environ = dict(environ)
                environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + self.prefix
                environ["PATH_INFO"] = path[len(self.prefix):] or "/"
            elif path == "/" and not environ.get("SCRIPT_NAME"):
                response = Response(status=302, headers={"Location": self.prefix + "/"})
                return response(environ, start_response)
            else:
                return NotFound()(environ, start_response)
        request = Request(environ)
        response = self.handle(request)
        return response(environ, start_response)

    def handle(self, request: Request) -> Response:
        """Authenticate, route, check POSTs, run the view, add headers."""
        denied = self._authenticate(request)
        if denied is not None:
            return self._secure(denied)
        urls = self.url_map.bind_to_environ(request.environ)
        cookie = request.cookies.get(CSRF_COOKIE)
        new = not valid_token_format(cookie)
        ctx = Ctx(request, urls, new_csrf_token() if new else str(cookie), new,
                  _read_flash(request))
        try:
            endpoint, values = urls.match()
            ctx.endpoint = endpoint
            if request.method == "POST":
                self._check_post(request)
            view: Callable[..., Response] = getattr(self, f"view_{endpoint}")
            response = view(ctx, **values)
        except Redirect as exc:
            response = self._redirect(ctx, exc)
        except HTTPException as exc:
            response = self._error(ctx, exc)
        except (RedisError, OSError) as exc:
            log.warning("Redis error while serving %s: %s", request.path, exc)
            response = self._unavailable(ctx, exc)
        if ctx.new_csrf and response.mimetype == "text/html":
            response.set_cookie(
                CSRF_COOKIE, ctx.csrf, path=_cookie_path(request), httponly=True,
                samesite="Strict", secure=request.is_secure,
            )
        if ctx.flash is not None and response.mimetype == "text/html":
            response.delete_cookie(FLASH_COOKIE, path=_cookie_path(request))
        return self._secure(response)

    def _authenticate(self, request: Request) -> Response | None:
        if self.basic_auth is not None and not self.basic_auth.check(
            request.headers.get("Authorization")
        ):
            return Response(
                "Authentication required.\n", status=401, mimetype="text/plain",
                headers={"WWW-Authenticate":
                         f'Basic realm="{self.basic_auth.realm}", charset="UTF-8"'},
            )
        if self.auth is not None:
            try:
                allowed = bool(self.auth(request.environ))
            except Exception:
                log.exception("the web UI's auth hook raised; refusing the request")
                allowed = False
            if not allowed:
                return Response("Forbidden.\n", status=403, mimetype="text/plain")
        return None

    def _check_post(self, request: Request) -> None:
        if self.read_only:
            raise Forbidden("The web UI is read-only: actions are turned off.")
        if request.headers.get("Sec-Fetch-Site", "").lower() == "cross-site":
            raise Forbidden("Cross-site request refused.")
        submitted = request.form.get(CSRF_FIELD) or request.headers.get(CSRF_HEADER)
        if not csrf_ok(request.cookies.get(CSRF_COOKIE), submitted):
            raise Forbidden(
                "Missing or invalid CSRF token. Reload the page and try again "
                "(cookies must be enabled)."
            )

    def _secure(self, response: Response) -> Response:
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        if "Cache-Control" not in response.headers:
            response.headers["Cache-Control"] = "no-store"
        return response

    # -- rendering -----------------------------------------------------------------------

    def render(self, ctx: Ctx, template: str, status: int = 200, *, summary: bool = True,
               **values: Any) -> Response:
        """Render a page; ``summary`` adds the stats bar (one cheap round trip pair)."""
        page = self.env.get_template(template)
        context: dict[str, Any] = dict(
            url_for=ctx.url_for,
            static=lambda name: self._static_url(ctx, name),
            csrf_field=CSRF_FIELD,
            csrf_token=ctx.csrf,
            here=_here(ctx.request),
            endpoint=ctx.endpoint,
            read_only=self.read_only,
            flash=ctx.flash,
            title=self.title,
            version=__version__,
            redis_url=fmt.safe_url(self.api.config.redis_url),
            namespace=self.api.config.namespace,
            now=time.time(),
            summary=self.api.stats() if summary else None,
            poll_interval=self.poll_interval,
            action_labels=ACTION_LABELS,
        )
        context.update(values)
        return Response(page.render(context), status=status, mimetype="text/html")

    def _static_url(self, ctx: Ctx, name: str) -> str:
        body = self.static_files[name][0]
        return ctx.url_for("static", name=name, v=hashlib.sha256(body).hexdigest()[:10])

    def _redirect(self, ctx: Ctx, exc: Redirect) -> Response:
        response = Response(status=303, headers={"Location": exc.location})
        response.set_cookie(
            FLASH_COOKIE, quote(f"{exc.kind}:{exc.message[:400]}"),
            path=_cookie_path(ctx.request), httponly=True, samesite="Strict",
            secure=ctx.request.is_secure, max_age=60,
        )
        return response

    def _error(self, ctx: Ctx, exc: HTTPException) -> Response:
        code = exc.code or 500
        if code in (301, 302, 307, 308):  # strict-slash redirects from the router
            return exc.get_response(ctx.request.environ)
        if ctx.request.accept_mimetypes.best == "application/json" or (
            ctx.request.path.endswith(".json")
        ):
            return Response(json.dumps({"error": exc.description}), status=code,
                            mimetype="application/json")
        response = self.render(ctx, "error.html", status=code, summary=False,
                               code=code, name=exc.name, description=exc.description)
        if code == 405 and hasattr(exc, "valid_methods") and exc.valid_methods:
            response.headers["Allow"] = ", ".join(exc.valid_methods)
        return response

    def _unavailable(self, ctx: Ctx, exc: BaseException) -> Response:
        message = f"Cannot read Redis at {fmt.safe_url(self.api.config.redis_url)}: {exc}"
        if ctx.request.path.endswith((".json", "/metrics")):
            return Response(message + "\n", status=503, mimetype="text/plain")
        return self.render(ctx, "error.html", status=503, summary=False, code=503,
                           name="Redis unavailable", description=message)

    def _back(self, ctx: Ctx, default: str) -> str:
        """Where a POST redirects: the form's ``next`` (a path of this app), else ``default``."""
        target = ctx.request.form.get("next", "")
        if not target.startswith("/") or target.startswith("//") or "\\" in target:
            return default
        return ctx.request.script_root + target

    # -- pages ---------------------------------------------------------------------------

    def view_dashboard(self, ctx: Ctx) -> Response:
        days = _choice(ctx.request.args.get("days"), HISTORY_DAYS, 30)
        history = self.api.history(days)
        queues = sorted(self.api.queues(), key=lambda q: (-q.size, q.name))
        return self.render(
            ctx, "dashboard.html",
            days=days, day_choices=HISTORY_DAYS, history=history,
            chart=fmt.history_chart(history), queues=queues[:10], queue_count=len(queues),
            redis=self.api.redis_info(),
        )

    def view_stats_json(self, ctx: Ctx) -> Response:
        stats = self.api.stats()
        body = {**stats.to_dict(), "time": time.time()}
        body.pop("queues", None)
        return Response(json.dumps(body), mimetype="application/json")

    def view_busy(self, ctx: Ctx) -> Response:
        include_dead = ctx.request.args.get("all") == "1"
        processes = self.api.processes.all(include_dead=include_dead)
        running = sorted(
            (job for p in processes for job in p.running),
            key=lambda j: (j.run_at or 0, j.identity, j.thread_id),
        )
        return self.render(ctx, "busy.html", processes=processes, running=running,
                           include_dead=include_dead)

    def view_busy_action(self, ctx: Ctx) -> Response:
        form = ctx.request.form
        action = form.get("action", "")
        if action not in ("quiet", "stop"):
            raise BadRequest(f"unknown action {action!r}")
        if form.get("all") == "1":
            identities = [p.identity for p in self.api.processes.all()]
        else:
            identities = form.getlist("identity")
        if not identities:
            raise Redirect(self._back(ctx, ctx.url_for("busy")), "No process selected.", "warn")
        unknown: list[str] = []
        for identity in identities:
            try:
                getattr(self.api.processes, action)(identity)
            except ProcessNotFound:
                unknown.append(identity)
        done = len(identities) - len(unknown)
        verb = "go quiet" if action == "quiet" else "stop"
        message = (f"Asked {done} process(es) to {verb}; each acts at its next heartbeat."
                   if done else "")
        if unknown:
            message += f" Not found (already gone?): {', '.join(unknown)}."
        raise Redirect(self._back(ctx, ctx.url_for("busy")), message.strip(),
                       "warn" if unknown else "ok")

    def view_queues(self, ctx: Ctx) -> Response:
        return self.render(ctx, "queues.html", queues=self.api.queues())

    def view_queue(self, ctx: Ctx, name: str) -> Response:
        args = ctx.request.args
        queue = self.api.queue(name)
        limit = _choice(args.get("limit"), PAGE_SIZES, 25)
        offset = _int_arg(args.get("offset"), 0)
        newest = args.get("order") == "newest"
        job_filter = _filter(args)
        page = queue.page(offset, limit, newest_first=newest, job_filter=job_filter,
                          max_scan=DEFAULT_MAX_SCAN)
        return self.render(
            ctx, "queue.html", queue=queue.info(), page=page, limit=limit,
            page_sizes=PAGE_SIZES, order="newest" if newest else "next",
            job_filter=job_filter, filtered=not job_filter.empty,
            pager=_pager(page, limit, exact=job_filter.empty),
            query=_query(args, "offset"),
        )

    def view_queue_action(self, ctx: Ctx, name: str) -> Response:
        form = ctx.request.form
        queue = self.api.queue(name)
        action = form.get("action") or ("delete" if form.get("single") else "")
        back = self._back(ctx, ctx.url_for("queue", name=name))
        if action == "pause":
            queue.pause()
            raise Redirect(back, f"Paused queue {name}: workers take no job from it.")
        if action == "unpause":
            queue.unpause()
            raise Redirect(back, f"Unpaused queue {name}.")
        if action == "clear":
            count = queue.clear()
            raise Redirect(ctx.url_for("queues"),
                           f"Cleared queue {name}: {count:,} job(s) deleted.")
        if action == "delete":
            single = form.get("single")
            jids = [single] if single else form.getlist("jid")
            if not jids:
                raise Redirect(back, "No job selected.", "warn")
            result = queue.delete(jids, max_scan=None)
            raise Redirect(back, *_outcome(result))
        if action == "delete_matching":
            job_filter = _filter(form)
            if job_filter.empty:
                raise BadRequest("give a class or a search text (or clear the whole queue)")
            result = queue.delete_matching(job_filter)
            raise Redirect(back, *_outcome(result))
        raise BadRequest(f"unknown action {action!r}")

    def _job_set(self, kind: str) -> JobSet:
        return self.api.job_set(kind)

    def view_set_page(self, ctx: Ctx, kind: str) -> Response:
        args = ctx.request.args
        info = SET_KINDS[kind]
        job_set = self._job_set(kind)
        limit = _choice(args.get("limit"), PAGE_SIZES, 25)
        offset = _int_arg(args.get("offset"), 0)
        sort = "retry_count" if args.get("sort") == "retry_count" else "time"
        default_order = "desc" if sort == "retry_count" else info.default_order
        order = args.get("order") if args.get("order") in ("asc", "desc") else default_order
        reverse = order == "desc" if sort == "time" else order == "asc"
        job_filter = _filter(args)
        page = job_set.page(offset, limit, sort=sort, reverse=reverse, job_filter=job_filter,
                            max_scan=DEFAULT_MAX_SCAN)
        return self.render(
            ctx, "set.html", kind=info, page=page, limit=limit, page_sizes=PAGE_SIZES,
            sort=sort, order=order, job_filter=job_filter, filtered=not job_filter.empty,
            actions=info.actions, action_labels=info.labels,
            size=page.total if job_filter.empty else job_set.size(),
            pager=_pager(page, limit, exact=job_filter.empty or sort == "retry_count",
                         numbered=job_filter.empty),
            query=_query(args, "offset"),
        )

    def view_set_action(self, ctx: Ctx, kind: str) -> Response:
        form = ctx.request.form
        job_set = self._job_set(kind)
        back = self._back(ctx, ctx.url_for("set_page", kind=kind))
        single = form.get("single", "")
        if single:
            action, _, key = single.partition(":")
            keys = [key]
        else:
            action = form.get("action", "")
            keys = form.getlist("key")
        if action not in SET_KINDS[kind].actions:
            raise BadRequest(f"the {job_set.name} set offers no action {action!r}")
        if form.get("scope") == "matching" and not single:
            result = job_set.apply_matching(action, _filter(form), max_scan=None)
            raise Redirect(back, *_outcome(result))
        if not keys:
            raise Redirect(back, "No job selected.", "warn")
        records, gone = self._resolve(job_set, keys)
        result = job_set.apply(action, records)
        result.missing.extend(gone)
        raise Redirect(back, *_outcome(result))

    def _resolve(self, job_set: JobSet, keys: list[str]) -> tuple[list[JobRecord], list[str]]:
        """Entries named by :func:`formatting.entry_key`, and the keys no longer there."""
        records: list[JobRecord] = []
        gone: list[str] = []
        for key in dict.fromkeys(keys):
            record = self._find_entry(job_set, key)
            if record is None:
                gone.append(key)
            else:
                records.append(record)
        return records, gone

    def _find_entry(self, job_set: JobSet, key: str) -> JobRecord | None:
        parsed = fmt.parse_entry_key(key)
        if parsed is None:
            raise BadRequest(f"malformed job key {key!r}")
        score, wanted = parsed
        for record in job_set.at_score(score):
            if fmt.digest(record.raw) == wanted:
                return record
        return None

    def view_set_job(self, ctx: Ctx, kind: str, key: str) -> Response:
        job_set = self._job_set(kind)
        record = self._find_entry(job_set, key)
        info = SET_KINDS[kind]
        return self.render(ctx, "job.html", kind=info, job=record, key=key,
                           actions=info.actions, action_labels=info.labels,
                           status=200 if record is not None else 404)

    def view_set_job_action(self, ctx: Ctx, kind: str, key: str) -> Response:
        job_set = self._job_set(kind)
        action = ctx.request.form.get("action", "")
        if action not in SET_KINDS[kind].actions:
            raise BadRequest(f"the {job_set.name} set offers no action {action!r}")
        record = self._find_entry(job_set, key)
        back = ctx.url_for("set_page", kind=kind)
        if record is None:
            raise Redirect(back, "That job is no longer in the set.", "warn")
        raise Redirect(back, *_outcome(job_set.apply(action, [record])))

    def view_classes(self, ctx: Ctx) -> Response:
        minutes = _choice(ctx.request.args.get("minutes"), CLASS_WINDOWS, 60)
        counts = self.api.class_counts(max_scan=CLASS_COUNT_SCAN)
        metrics = {m.job_class: m for m in self.api.class_metrics(minutes)}
        rows: dict[str, dict[str, Any]] = {}
        incomplete: list[str] = []

        def row(name: str) -> dict[str, Any]:
            return rows.setdefault(name, {"queued": 0, "queues": {}, "schedule": 0,
                                          "retry": 0, "dead": 0, "running": 0})

        for place in counts:
            if not place.complete:
                incomplete.append(place.location.replace("queue:", "queue "))
            for name, n in place.counts.items():
                r = row(name)
                if place.location.startswith("queue:"):
                    r["queued"] += n
                    r["queues"][place.location[6:]] = n
                else:
                    r[place.location] += n
        for name in metrics:
            row(name)
        ordered = sorted(
            rows.items(),
            key=lambda item: (
                -(item[1]["queued"] + item[1]["retry"] + item[1]["dead"]
                  + item[1]["schedule"] + item[1]["running"]),
                -(metrics[item[0]].processed if item[0] in metrics else 0),
                item[0],
            ),
        )
        return self.render(ctx, "classes.html", rows=ordered, metrics=metrics,
                           minutes=minutes, windows=CLASS_WINDOWS, incomplete=incomplete,
                           scan=CLASS_COUNT_SCAN)

    def view_keys(self, ctx: Ctx) -> Response:
        """Ordering keys and fair tenants (issue #5); the unblock buttons post to the
        retry/dead set actions (``view_set_action``), the weight form to ``keys_action``."""
        args = ctx.request.args
        limit = _choice(args.get("limit"), PAGE_SIZES, 50)
        queue = (args.get("queue") or "").strip() or None
        queue_names = [q.name for q in self.api.queues()]
        keys = self.api.ordering_keys(queue, limit=limit)
        key_total = self.api.ordering_key_count(queue)
        blocked = self.api.blocked_keys(queue, max_scan=KEYS_BLOCKED_SCAN)
        tenants = []
        for name in [queue] if queue is not None else queue_names:
            listed = self.api.tenants(name, limit=limit)
            if listed:
                total = self.api.tenant_count(name) if len(listed) == limit else len(listed)
                tenants.append((name, listed, total))
        return self.render(
            ctx, "keys.html", keys=keys, key_total=key_total, blocked=blocked,
            blocked_scan=KEYS_BLOCKED_SCAN, tenants=tenants, queue=queue,
            queue_names=queue_names, limit=limit, page_sizes=PAGE_SIZES,
            set_slugs={"retry": "retries", "dead": "dead"},
        )

    def view_keys_action(self, ctx: Ctx) -> Response:
        """Set a tenant's weight; the only action of the keys page not on a job set."""
        form = ctx.request.form
        back = self._back(ctx, ctx.url_for("keys"))
        if form.get("action") != "weight":
            raise BadRequest(f"unknown action {form.get('action')!r}")
        queue = (form.get("queue") or "").strip()
        tenant = (form.get("tenant") or "").strip()
        if not queue:
            raise Redirect(back, "Give the queue of the tenant.", "error")
        try:
            weight = int((form.get("weight") or "").strip())
        except ValueError:
            raise Redirect(back, "The weight must be a whole number from 1 to 1000.",
                           "error") from None
        try:
            self.api.set_tenant_weight(queue, tenant, weight)
        except ValueError as exc:
            raise Redirect(back, str(exc), "error") from None
        raise Redirect(back, f"Tenant {tenant} of queue {queue} now gets {weight} job(s) "
                             "per turn, from its next turn.")

    def view_explain(self, ctx: Ctx) -> Response:
        jid = (ctx.request.args.get("jid") or "").strip()
        answer = self.api.explain(jid) if jid else None
        return self.render(ctx, "explain.html", jid=jid, answer=answer,
                           set_slugs={"scheduled": "scheduled", "retry": "retries",
                                      "dead": "dead"})

    def view_metrics(self, ctx: Ctx) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        from rfetch.metrics import api_registry

        if self._metrics_registry is None:
            self._metrics_registry = api_registry(self.api, self.metrics_window)
        body = generate_latest(self._metrics_registry)
        return Response(body, mimetype=None, content_type=CONTENT_TYPE_LATEST)

    def view_static(self, ctx: Ctx, name: str) -> Response:
        found = self.static_files.get(name)
        if found is None:
            raise NotFound()
        body, mimetype = found
        response = Response(body, mimetype=mimetype)
        response.headers["Cache-Control"] = "public, max-age=86400"
        return response


class Forbidden(HTTPException):
    code = 403
    description = "Forbidden."

    def __init__(self, description: str) -> None:
        super().__init__(description)


class BadRequest(HTTPException):
    code = 400

    def __init__(self, description: str) -> None:
        super().__init__(description)


def normalize_prefix(prefix: str | None) -> str:
    """``rfetch/`` -> ``/rfetch``; ``/`` and empty -> ``""``."""
    text = (prefix or "").strip().strip("/")
    return f"/{text}" if text else ""


def _load_static() -> dict[str, tuple[bytes, str]]:
    found: dict[str, tuple[bytes, str]] = {}
    for entry in resources.files("rfetch.web").joinpath("static").iterdir():
        if entry.is_file() and not entry.name.startswith("."):
            mimetype = mimetypes.guess_type(entry.name)[0] or "application/octet-stream"
            found[entry.name] = (entry.read_bytes(), mimetype)
    return found


def _cookie_path(request: Request) -> str:
    return request.script_root or "/"


def _read_flash(request: Request) -> tuple[str, str] | None:
    raw = request.cookies.get(FLASH_COOKIE)
    if not raw:
        return None
    kind, _, message = unquote(raw).partition(":")
    if kind not in ("ok", "warn", "error") or not message:
        return None
    return kind, message[:400]


def _here(request: Request) -> str:
    """This page's path and query, relative to the app (a form's ``next``)."""
    query = request.query_string.decode("latin-1")
    return request.path + (f"?{query}" if query else "")


def _choice(text: str | None, choices: tuple[int, ...], default: int) -> int:
    try:
        value = int(text or "")
    except ValueError:
        return default
    return value if value in choices else default


def _int_arg(text: str | None, default: int) -> int:
    try:
        return max(0, int(text or ""))
    except ValueError:
        return default


def _filter(values: MultiDict[str, str]) -> JobFilter:
    job_class = (values.get("class") or "").strip() or None
    grep = (values.get("grep") or "").strip() or None
    return JobFilter(job_class, grep)


def _query(args: MultiDict[str, str], *without: str) -> dict[str, str]:
    """The page's query arguments minus ``without`` (for links that change one of them)."""
    return {k: v for k, v in args.items() if k not in without and v != ""}


@dataclass(frozen=True)
class Pager:
    """Links of a page: offsets of the first, previous and next pages, and page numbers."""

    first: int | None
    prev: int | None
    next: int | None
    shown_from: int
    shown_to: int
    numbers: list[tuple[int | None, int]]
    current: int


def _pager(page: Page, limit: int, exact: bool, numbered: bool | None = None) -> Pager:
    """Paging links.

    Args:
        exact: offsets count the jobs listed (unfiltered, or sorted by retry count), so the
            previous page's offset is known; a filtered scan only knows where the next
            page starts.
        numbered: show page numbers (default: ``exact``); they need ``page.total`` to count
            the jobs listed, which is not so for a filtered listing.
    """
    offset = page.offset
    prev = max(0, offset - limit) if exact and offset > 0 else None
    numbers: list[tuple[int | None, int]] = []
    current = offset // limit + 1
    if (exact if numbered is None else numbered) and page.total > limit:
        last = (page.total - 1) // limit + 1
        wanted = sorted({1, 2, last - 1, last, *range(current - 2, current + 3)})
        previous = 0
        for n in wanted:
            if n < 1 or n > last:
                continue
            if n - previous > 1:
                numbers.append((None, 0))
            numbers.append((n, (n - 1) * limit))
            previous = n
    return Pager(
        first=0 if offset > 0 else None,
        prev=prev,
        next=page.next_offset,
        shown_from=offset + 1 if page.jobs else 0,
        shown_to=offset + len(page.jobs),
        numbers=numbers,
        current=current,
    )


def _outcome(result: ActionResult) -> tuple[str, str]:
    """Flash message and kind for an action's result."""
    message = f"{ACTION_PAST.get(result.action, result.action)}: {result.done:,} job(s)."
    kind = "ok"
    if result.missing:
        message += f" {len(result.missing):,} already gone (moved by a worker or another admin)."
        kind = "warn"
    if result.skipped:
        message += f" {len(result.skipped):,} skipped (not valid jobs)."
        kind = "warn"
    if not result.complete:
        message += (f" Stopped after examining {result.scanned:,} entries; run it again for "
                    "the rest.")
        kind = "warn"
    return message, kind
