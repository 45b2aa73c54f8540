"""The ``rfetch`` click group; each command module adds its commands to it."""

from __future__ import annotations

import click

from rfetch.version import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rfetch")
def main() -> None:
    """rfetch: reliable background jobs on Redis, with Sidekiq's data model."""
