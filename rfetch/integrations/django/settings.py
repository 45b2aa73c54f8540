"""``settings.RFETCH`` (a dict) read into a :class:`rfetch.Config` and the integration's own
options. Importable without configured Django settings: it only reads the dict it is given.

Keys are the :class:`rfetch.Config` field names (``redis_url``, ``namespace``, ``queues``,
``concurrency``, ``client_middleware``, ...) plus the integration's options:

- ``on_commit`` (default True): a push inside ``transaction.atomic()`` is written to Redis
  when the transaction commits, and never if it rolls back (Sidekiq 7's transaction-aware
  client); False pushes at once;
- ``outbox`` (default False): every push is a row of the outbox table ``rfetch_outbox``,
  written in the surrounding transaction (at once outside one), which ``rfetch relay``
  moves to Redis, each job once (docs/outbox.md); it takes precedence over ``on_commit``;
- ``database`` (default ``"default"``): the database alias whose transactions count;
- ``web``: keyword arguments for :func:`rfetch.web.create_app` (``read_only``, ``title``,
  ``poll_interval``, ``metrics_window``), plus ``login_url`` (default ``"admin:login"``),
  where a visitor who is not staff is sent, and ``metrics_token``: without it ``/metrics``
  answers anyone (Prometheus scrapes without a Django session); with it, only a request
  with ``Authorization: Bearer <metrics_token>``.

``queues`` may be written as strings (``"mail,2"``), and the entries of
``client_middleware``, ``server_middleware``, ``error_handlers`` and ``death_handlers`` as
dotted import paths (``"myapp.tracing.audit"``), as Django settings usually name code.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rfetch.config import Config, QueueSpec
from rfetch.errors import ConfigError

CALLABLE_LISTS = ("client_middleware", "server_middleware", "error_handlers", "death_handlers")
"""Config fields whose entries may be dotted import paths."""

WEB_OPTIONS = frozenset(
    {"read_only", "title", "poll_interval", "metrics_window", "login_url", "metrics_token",
     "outbox_database"}
)
OWN_WEB_OPTIONS = frozenset({"login_url", "metrics_token"})
"""Keys of ``RFETCH["web"]`` that the view reads, not :func:`rfetch.web.create_app`."""


@dataclass(frozen=True)
class DjangoOptions:
    """The integration's own options (see the module docstring)."""

    on_commit: bool = True
    outbox: bool = False
    database: str = "default"
    web: Mapping[str, Any] = field(default_factory=dict)

    @property
    def login_url(self) -> str:
        """Where the web UI sends a visitor who is not staff (a URL or a URL name)."""
        return str(self.web.get("login_url", "admin:login"))

    @property
    def metrics_token(self) -> str | None:
        """The bearer token ``/metrics`` requires, or None (``/metrics`` is open)."""
        token = self.web.get("metrics_token")
        return str(token) if token else None

    @property
    def web_app_options(self) -> dict[str, Any]:
        """Keyword arguments for :func:`rfetch.web.create_app`."""
        return {k: v for k, v in self.web.items() if k not in OWN_WEB_OPTIONS}


def split_settings(values: Mapping[str, Any]) -> tuple[dict[str, Any], DjangoOptions]:
    """Config fields (converted) and the integration's options of ``settings.RFETCH``.

    Raises:
        ConfigError: an unknown key, or a value of the wrong shape.
    """
    if not isinstance(values, Mapping):
        raise ConfigError(f"settings.RFETCH must be a dict, got {type(values).__name__}")
    known = {f.name for f in dataclasses.fields(Config)}
    options = {"on_commit", "outbox", "database", "web"}
    unknown = set(values) - known - options
    if unknown:
        raise ConfigError(
            f"unknown key(s) {sorted(unknown)} in settings.RFETCH; known: "
            f"{sorted(known | options)}"
        )
    web = values.get("web", {})
    if not isinstance(web, Mapping) or set(web) - WEB_OPTIONS:
        raise ConfigError(f"settings.RFETCH['web'] takes the keys {sorted(WEB_OPTIONS)}")
    django_options = DjangoOptions(
        on_commit=bool(values.get("on_commit", True)),
        outbox=bool(values.get("outbox", False)),
        database=str(values.get("database", "default")),
        web=dict(web),
    )
    fields = {k: _convert(k, v) for k, v in values.items() if k in known}
    return fields, django_options


def _convert(name: str, value: Any) -> Any:
    if name == "queues":
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise ConfigError(
                "settings.RFETCH['queues'] must be a list, e.g. ['mail,2', 'default']"
            )
        return tuple(q if isinstance(q, QueueSpec) else QueueSpec.parse(str(q)) for q in value)
    if name in CALLABLE_LISTS:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"settings.RFETCH[{name!r}] must be a list")
        return [_resolve(name, item) for item in value]
    return value


def _resolve(name: str, item: Any) -> Any:
    if callable(item):
        return item
    if isinstance(item, str):
        from django.utils.module_loading import import_string

        try:
            return import_string(item)
        except ImportError as exc:
            raise ConfigError(f"settings.RFETCH[{name!r}]: cannot import {item!r}: {exc}") from None
    raise ConfigError(f"settings.RFETCH[{name!r}] entries must be callables or dotted paths")


def config_from_settings(values: Mapping[str, Any]) -> tuple[Config, DjangoOptions]:
    """The application's Config: ``settings.RFETCH`` over ``Config.from_env()``.

    Raises:
        ConfigError: a bad key or value.
    """
    fields, options = split_settings(values)
    return Config.from_env(**fields), options


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return tuple(a) == tuple(b)
    return bool(a == b)


def apply_to_worker(config: Config, values: Mapping[str, Any]) -> DjangoOptions:
    """Apply ``settings.RFETCH`` to a worker's Config: command-line options win, then the
    settings, then the environment (a field still equal to what the environment alone
    gives is taken from the settings); list fields (middleware, handlers) are extended.

    Raises:
        ConfigError: a bad key or value.
    """
    fields, options = split_settings(values)
    baseline = Config.from_env()
    for name, value in fields.items():
        current = getattr(config, name)
        if name in CALLABLE_LISTS:
            current.extend(v for v in value if v not in current)
        elif _same(current, getattr(baseline, name)):
            setattr(config, name, value)
    config.validate()
    return options
