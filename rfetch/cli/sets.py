"""``rfetch retries|scheduled|dead list|retry|delete|kill``: the sorted sets, a page at a
time, and actions on their jobs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import click

from rfetch.api import JobFilter

from .app import main
from .options import admin_api, connection_options, filter_options
from .output import echo_json, table, when

if TYPE_CHECKING:
    from rfetch.api import JobRecord, JobSet, Page

SET_COLUMNS = {"schedule": "RUN AT (UTC)", "retry": "NEXT RETRY (UTC)", "dead": "DIED (UTC)"}


def _set_group(command: str, set_name: str, summary: str, actions: dict[str, str]) -> None:
    """Add ``rfetch <command> list|<action>...`` for one sorted set.

    Args:
        command: the command name (``retries``, ``scheduled``, ``dead``).
        set_name: the API's name for the set.
        summary: help text.
        actions: CLI action name -> API action (``retry`` of the scheduled set is
            ``add_to_queue``: run now).
    """

    group = _group(command, summary)

    @group.command("list")
    @filter_options
    @click.option("--sort", type=click.Choice(["time", "retry_count"]), default="time",
                  show_default=True, help="By time (score), or most retried first.")
    @click.option("--reverse", is_flag=True, help="Latest first / fewest retries first.")
    @click.option("--limit", type=click.IntRange(min=1), default=25, show_default=True)
    @click.option("--offset", type=click.IntRange(min=0), default=0, show_default=True)
    @click.option("--max-scan", type=click.IntRange(min=1), default=100_000, show_default=True,
                  help="Most entries a filter or the retry_count sort examines.")
    @connection_options
    def list_jobs(
        job_class: str | None = None,
        grep: str | None = None,
        sort: str = "time",
        reverse: bool = False,
        limit: int = 25,
        offset: int = 0,
        max_scan: int = 100_000,
        redis_url: str | None = None,
        namespace: str | None = None,
        as_json: bool = False,
    ) -> None:
        """List jobs, a page at a time."""
        with admin_api(redis_url, namespace) as api:
            page = api.job_set(set_name).page(
                offset, limit, sort=sort, reverse=reverse,
                job_filter=JobFilter(job_class, grep), max_scan=max_scan,
            )
        if as_json:
            echo_json(page.to_dict())
        else:
            _print_page(page, set_name, offset)

    for cli_name, action in actions.items():
        group.command(cli_name, help=_ACTION_HELP[cli_name])(_action_command(set_name, action))


def _print_page(page: Page, set_name: str, offset: int) -> None:
    """One page of a set as a table, and where the next page starts."""
    table(
        ["JID", "CLASS", "QUEUE", SET_COLUMNS[set_name], "RETRIES", "ERROR", "ARGS"],
        [
            (
                j.jid, j.job_class, j.queue, when(j.score), j.retry_count,
                ": ".join(x for x in (j.error_class, j.error_message) if x) or None,
                j.display_args,
            )
            for j in page.jobs
        ],
    )
    shown = f"{offset + 1}-{offset + len(page.jobs)}" if page.jobs else "none"
    more = f"; next: --offset {page.next_offset}" if page.next_offset is not None else ""
    click.echo(f"showing {shown} of {page.total} in the set{more}")
    if not page.complete:
        click.echo(f"scan stopped after {page.scanned} entries (--max-scan); "
                   "more may match further on")


def _group(command: str, summary: str) -> click.Group:
    """``rfetch <command>``: alone (or with only the connection options), its list."""

    @main.group(name=command, invoke_without_command=True,
                help=f"{summary} Alone: the first page, as '{command} list'.")
    @connection_options
    @click.pass_context
    def group(
        ctx: click.Context, redis_url: str | None, namespace: str | None, as_json: bool
    ) -> None:
        if ctx.invoked_subcommand is None:
            listing = group.get_command(ctx, "list")
            if listing is not None:
                ctx.invoke(listing, redis_url=redis_url, namespace=namespace, as_json=as_json)
        elif redis_url or namespace or as_json:
            raise click.UsageError(
                f"give --redis-url, --namespace and --json after the subcommand "
                f"({command} {ctx.invoked_subcommand} ...)"
            )

    return group


_ACTION_HELP = {
    "retry": "Retry JIDs (or --all-matching jobs) now: push them to their queue.",
    "delete": "Delete JIDs (or --all-matching jobs).",
    "kill": "Move JIDs (or --all-matching jobs) to the dead set.",
}


def _action_command(set_name: str, action: str) -> Callable[..., None]:
    @click.argument("jids", nargs=-1, metavar="[JID]...")
    @filter_options
    @click.option("--all-matching", is_flag=True,
                  help="Act on every job passing --class/--grep (every job without them).")
    @connection_options
    def run(
        jids: tuple[str, ...],
        job_class: str | None,
        grep: str | None,
        all_matching: bool,
        redis_url: str | None,
        namespace: str | None,
        as_json: bool,
    ) -> None:
        if all_matching == bool(jids):
            raise click.UsageError("give JIDs, or --all-matching (with --class/--grep)")
        if jids and (job_class or grep):
            raise click.UsageError("--class and --grep go with --all-matching, not with JIDs")
        with admin_api(redis_url, namespace) as api:
            job_set = api.job_set(set_name)
            if all_matching:
                result = job_set.apply_matching(action, JobFilter(job_class, grep))
            else:
                records = _find_all(job_set, jids)
                result = job_set.apply(action, records)
        if as_json:
            echo_json(result.to_dict())
            return
        click.echo(f"{action.replace('_', ' ')}: {result.done} job(s)")
        if result.missing:
            click.echo(f"gone before the action: {' '.join(result.missing)}")
        if result.skipped:
            click.echo(f"skipped (not a valid job): {' '.join(result.skipped)}")

    return run


def _find_all(job_set: JobSet, jids: Sequence[str]) -> list[JobRecord]:
    """The entries of these jids, or a usage error naming those not in the set."""
    found = job_set.find_all(jids)
    seen = {r.jid for r in found.records}
    missing = [j for j in jids if j not in seen]
    if missing:
        raise click.BadParameter(
            f"no job with jid {', '.join(missing)} in the {job_set.name} set", param_hint="JID"
        )
    return found.records


_set_group("retries", "retry", "Failed jobs waiting for their next try.",
           {"retry": "retry", "delete": "delete", "kill": "kill"})
_set_group("scheduled", "schedule", "Jobs scheduled to run later.",
           {"retry": "add_to_queue", "delete": "delete", "kill": "kill"})
_set_group("dead", "dead", "The dead set (morgue).", {"retry": "retry", "delete": "delete"})
