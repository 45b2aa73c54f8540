"""How the CLI prints answers: plain-text tables for people, indented JSON for scripts
(``--json``). Figures and times are formatted by :mod:`rfetch.formatting`."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import click

from rfetch import formatting

MISSING = "-"
"""What an empty cell shows."""

CELL_WIDTH = 60
"""Widest cell of a table, characters; longer values end with ``...``."""


def echo_json(value: Any) -> None:
    """Print ``value`` as indented JSON (non-JSON values as their ``str``)."""
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Print plain columns, two spaces apart; the last column is not padded."""
    cells = [[str(h) for h in headers]] + [[cell(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        padded = [v.ljust(widths[i]) for i, v in enumerate(row[:-1])] + [row[-1]]
        click.echo("  ".join(padded).rstrip())


def cell(value: Any) -> str:
    """One table cell: ``-`` for None, a string as it is, anything else as JSON, on one
    line and at most :data:`CELL_WIDTH` characters."""
    if value is None:
        return MISSING
    return formatting.one_line(value, CELL_WIDTH, "...")


def when(at: float | None) -> str:
    """Epoch seconds as ``YYYY-MM-DD HH:MM:SS`` (the column header says UTC)."""
    return formatting.utc_time(at, zone=False, missing=MISSING)


def yes_no(flag: bool) -> str:
    """``yes`` or ``no``."""
    return "yes" if flag else "no"
