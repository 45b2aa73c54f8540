"""Pushing jobs that wait on another job (``after=``), and chains of them, in one atomic
``depend.lua`` call (see docs/workflows.md for the design)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rfetch.errors import ConfigError
from rfetch.jobs.payload import Routing, dumps, new_jid
from rfetch.push.batch_context import collecting
from rfetch.push.client import Client
from rfetch.push.sink import INTERCEPTION
from rfetch.store.workflow_commands import Dependent, WorkflowCommands

CHAIN_RESULT_TTL = 24 * 3600
"""Seconds a chain link's record is kept when the link gives no ``store_result`` (Sidekiq
Pro keeps a batch 24 h after its success)."""


@dataclass(frozen=True)
class Pushed:
    """What pushing a job with a dependency did.

    Attributes:
        jid: the job's jid.
        state: ``"queued"`` (in its queue: its dependency had already succeeded),
            ``"waiting"`` (outside every queue until its dependency ends), ``"dead"`` (its
            dependency had died: in the dead set) or ``"cancelled"`` (dropped, counted).
    """

    jid: str
    state: str


def _checked_client(client: Client) -> Client:
    if client.sink is not None or INTERCEPTION.current() is not None:
        raise ConfigError(
            "jobs with after= and chains are written to Redis by one script: the test modes "
            "and the Django on-commit sink do not hold them (push them without a sink)"
        )
    if len(client.deliveries) > 1:
        raise ConfigError("jobs with after= and chains are not supported with shards")
    if collecting() is not None:
        raise ConfigError(
            "a job with after= (or a chain) cannot join a batch's jobs() block: the batch "
            "would not count it. Push it after the block, with after=<the batch> to wait for "
            "the batch"
        )
    return client


def push_dependents(
    client: Client, jobs: Sequence[tuple[str, Sequence[Any], Mapping[str, Any]]]
) -> list[Pushed]:
    """Push ``jobs`` (class name, arguments, options) in order, all or none. A job whose
    options hold ``after`` (a jid; ``"$prev"`` names the job before it in ``jobs``) waits
    for that job; the others go to their queue now.

    Raises:
        ConfigError: a bad option; client middleware dropped a job (nothing is written);
            a client with a sink or shards; a batch's ``jobs()`` block is open.
        ArgsNotSerializable, PayloadTooLarge: nothing is written.
        redis.exceptions.RedisError: Redis refused or is unreachable (the call wrote every
            job or none; no reliable-push buffer holds these jobs).
    """
    client = _checked_client(client)
    out: list[Dependent] = []
    previous = ""
    for position, (name, args, options) in enumerate(jobs):
        opts = dict(options)
        if opts.get("after") == "$prev":
            opts["after"] = previous
        jid = str(opts.pop("jid", None) or new_jid())
        payload = client.prepare(name, args, {**opts, "jid": jid})
        if payload is None:
            raise ConfigError(
                f"client middleware dropped job {position + 1} ({name}) of a workflow: "
                "nothing was pushed"
            )
        if "at" in payload:
            raise ConfigError("a job with after= runs when its dependency ends, not at a time")
        text = dumps(payload, client.config.max_payload_bytes)
        after = payload.get("after")
        out.append(Dependent(jid, payload["queue"], text, after, Routing.of(payload)))
        previous = jid
    states = WorkflowCommands(client.delivery.commands).depend(out)
    return [Pushed(job.jid, state) for job, state in zip(out, states, strict=True)]
