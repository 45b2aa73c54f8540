"""Every ``rfetch`` command's ``--help`` is plain text: no reStructuredText markup
(a double backquote) from a docstring reaches the terminal."""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from rfetch.cli import main


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name)


@pytest.mark.parametrize("path", list(_commands(main)), ids=" ".join)
def test_help_has_no_rst_markup(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(main, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "``" not in result.output
    assert ":func:" not in result.output and ":class:" not in result.output
