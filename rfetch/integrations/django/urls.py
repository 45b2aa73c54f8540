"""URLs of the web UI: ``path("rfetch/", include("rfetch.integrations.django.urls"))``."""

from __future__ import annotations

from django.urls import re_path

from rfetch.integrations.django.views import web_ui

app_name = "rfetch"

urlpatterns = [
    re_path(r"^(?P<subpath>.*)$", web_ui, name="web"),
]
