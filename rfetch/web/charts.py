"""The dashboard's history chart: bar geometry computed here, drawn as inline SVG by
``dashboard.html`` (no JavaScript charting library)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from rfetch.api import DayStats

NICE_STEPS = (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10)


@dataclass(frozen=True)
class Bar:
    """One day of the history chart (SVG coordinates)."""

    x: float
    width: float
    processed_y: float
    processed_h: float
    failed_y: float
    failed_h: float
    label: str
    title: str
    show_label: bool


@dataclass(frozen=True)
class HistoryChart:
    """Geometry of the history bar chart, drawn as inline SVG by the template."""

    width: int
    height: int
    top: int
    bottom: int
    left: int
    bars: list[Bar]
    ticks: list[tuple[float, str]]


def history_chart(days: list[DayStats], width: int = 1000, height: int = 220) -> HistoryChart:
    """Bars for ``days`` (newest first, as ``api.history`` returns them), oldest on the left."""
    ordered = list(reversed(days))
    left, top, bottom = 56, 10, 26
    plot_h = height - top - bottom
    peak = max([d.processed for d in ordered] + [1])
    scale = _nice_ceiling(peak)
    slot = (width - left - 8) / max(len(ordered), 1)
    bar_w = max(slot * 0.7, 1.0)
    every = max(1, math.ceil(len(ordered) / 10))
    bars = []
    for i, day in enumerate(ordered):
        ph = plot_h * day.processed / scale
        fh = plot_h * min(day.failed, day.processed or day.failed) / scale
        x = left + i * slot + (slot - bar_w) / 2
        bars.append(
            Bar(
                x=round(x, 1),
                width=round(bar_w, 1),
                processed_y=round(top + plot_h - ph, 1),
                processed_h=round(ph, 1),
                failed_y=round(top + plot_h - fh, 1),
                failed_h=round(fh, 1),
                label=day.date[5:],
                title=f"{day.date}: {day.processed:,} processed, {day.failed:,} failed",
                show_label=(len(ordered) - 1 - i) % every == 0,
            )
        )
    ticks = [(round(top + plot_h - plot_h * f, 1), _short(scale * f)) for f in (0, 0.5, 1)]
    return HistoryChart(width, height, top, bottom, left, bars, ticks)


def _nice_ceiling(value: float) -> float:
    """The smallest "round" number (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 x 10^n) at or above
    ``value``."""
    exponent = 10 ** math.floor(math.log10(value))
    for step in NICE_STEPS:
        if step * exponent >= value:
            return float(step * exponent)
    return float(10 * exponent)  # pragma: no cover


def _short(value: float) -> str:
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if value >= size:
            return f"{value / size:g}{unit}"
    return f"{value:g}"
