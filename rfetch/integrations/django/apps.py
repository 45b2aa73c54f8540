"""The Django application: add ``"rfetch.integrations.django"`` to ``INSTALLED_APPS``."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from django.apps import AppConfig, apps
from django.conf import settings

from rfetch.config import Config
from rfetch.integrations.django.outbox import OutboxSink
from rfetch.integrations.django.settings import DjangoOptions, config_from_settings
from rfetch.integrations.django.sink import OnCommitSink
from rfetch.push.client import DEFAULT, Client
from rfetch.push.sink import Sink

if TYPE_CHECKING:
    from rfetch.web import WebApp


class RfetchConfig(AppConfig):
    """Reads ``settings.RFETCH`` when Django starts and makes the process-wide client (the
    one ``perform_async`` uses) push on commit; holds the web UI and the immediate client.

    Attributes (set by ``ready``):
        config: the Config built from the settings.
        options: the integration's options.
        client: the default client (pushes inside a transaction wait for its commit,
            unless ``RFETCH["on_commit"]`` is False; with ``RFETCH["outbox"]`` they are
            rows of the outbox table, in the transaction).
    """

    name = "rfetch.integrations.django"
    label = "rfetch"
    verbose_name = "rfetch"

    config: Config
    options: DjangoOptions
    client: Client

    def ready(self) -> None:
        self.config, self.options = config_from_settings(getattr(settings, "RFETCH", {}))
        self.client = Client(self.config, sink=self._sink())
        DEFAULT.set(self.client)
        self._lock = threading.Lock()
        self._immediate: Client | None = None
        self._web: WebApp | None = None

    def _sink(self) -> Sink | None:
        """Where the default client's pushes go: the outbox table (``RFETCH["outbox"]``),
        Redis at commit (``on_commit``, the default), or Redis at once."""
        if self.options.outbox:
            return OutboxSink(self.options.database)
        return OnCommitSink(self.options.database) if self.options.on_commit else None

    def immediate_client(self) -> Client:
        """A client of the same Config that pushes at once, even inside a transaction."""
        with self._lock:
            if self._immediate is None:
                self._immediate = (
                    self.client if self.client.sink is None else Client(self.config)
                )
            return self._immediate

    def web_app(self) -> WebApp:
        """The web UI (built at first use; Django's staff login guards it, so rfetch's own
        basic auth is off). Its CSRF tokens are signed with ``SECRET_KEY`` (under a salt of
        their own), so every process of the site accepts them, and the origins of
        ``CSRF_TRUSTED_ORIGINS`` may post to it, as to the rest of the site.

        Raises:
            ValueError: ``SECRET_KEY`` under 16 characters.
        """
        from rfetch.web import create_app

        with self._lock:
            if self._web is None:
                self._web = create_app(
                    self.config, basic_auth=False, secret_key=settings.SECRET_KEY,
                    trusted_origins=list(getattr(settings, "CSRF_TRUSTED_ORIGINS", [])),
                    **self.options.web_app_options,
                )
            return self._web


def app_config() -> RfetchConfig:
    """The installed :class:`RfetchConfig`.

    Raises:
        LookupError: ``rfetch.integrations.django`` is not in ``INSTALLED_APPS``.
    """
    config = apps.get_app_config("rfetch")
    assert isinstance(config, RfetchConfig)
    return config
