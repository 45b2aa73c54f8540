"""Epoch seconds as the datetimes Django's ``TaskResult`` holds."""

from __future__ import annotations

import datetime as dt

from django.conf import settings


def to_datetime(epoch: float | None) -> dt.datetime | None:
    """``epoch`` (float epoch seconds) as an aware UTC datetime, or a naive local one when
    ``settings.USE_TZ`` is False (Django's rule for ``timezone.now()``); None stays None."""
    if epoch is None:
        return None
    if getattr(settings, "USE_TZ", True):
        return dt.datetime.fromtimestamp(epoch, tz=dt.timezone.utc)
    return dt.datetime.fromtimestamp(epoch)


def to_epoch(when: dt.datetime) -> float:
    """A datetime as float epoch seconds (a naive one is local time, as Django's
    ``run_after`` is when ``USE_TZ`` is False)."""
    return when.timestamp()
