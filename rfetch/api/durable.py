"""What ``explain`` says about a durable job: its iteration state (Sidekiq 7.3's
``it-<jid>``) and its recorded steps (``rfetch:steps:<jid>``)."""

from __future__ import annotations

from rfetch.durable.checkpoint import IterationState
from rfetch.formatting import duration

from .context import Context


def durable_lines(ctx: Context, jid: str) -> list[tuple[str, str]]:
    """``(state, line)`` for ``jid``: ``iteration`` (cursor, executions, items, runtime,
    cancel) and ``steps`` (the recorded step names); empty when it has neither (two
    HGETALLs)."""
    out: list[tuple[str, str]] = []
    fields = _text(ctx.redis.hgetall(ctx.keys.iteration(jid)))
    if fields:
        out.append(("iteration", iteration_text(fields)))
    steps = _text(ctx.redis.hgetall(ctx.keys.steps(jid)))
    if steps:
        names = ", ".join(sorted(steps)[:10]) + (", ..." if len(steps) > 10 else "")
        out.append(("steps", f"{len(steps)} step result(s) recorded (not run again): {names}"))
    return out


def forget(ctx: Context, jid: str) -> int:
    """Delete ``jid``'s iteration state and step results (the web UI's "Retry from start":
    the next execution starts from the first item and runs every step again); the number
    of keys deleted."""
    return int(ctx.redis.delete(ctx.keys.iteration(jid), ctx.keys.steps(jid)))


def iteration_text(fields: dict[str, str]) -> str:
    """One line about an iterable job's saved state (the fields of ``it-<jid>``)."""
    state = IterationState.parse(fields)
    done = fields.get("n")
    spent = duration(state.runtime, tenths_below=60)
    text = (f"iterable job: resumes after cursor {fields.get('c', 'null')}, "
            f"{state.executions} execution(s), {spent} iterating")
    if done is not None:
        text += f", {done} item(s) done"
    if state.cancelled is not None:
        text += f"; cancelled at {state.cancelled} (epoch s)"
    return text


def _text(raw: dict[bytes | str, bytes | str]) -> dict[str, str]:
    return {
        (k.decode() if isinstance(k, bytes) else k):
        (v.decode(errors="replace") if isinstance(v, bytes) else v)
        for k, v in raw.items()
    }
