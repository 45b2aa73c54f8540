"""``rfetch.chain``: Celery's chain on rfetch's job dependencies."""

from __future__ import annotations

from dataclasses import dataclass

from rfetch.errors import ConfigError
from rfetch.jobs.signature import Signature
from rfetch.push.client import DEFAULT, Client
from rfetch.workflow.depend import CHAIN_RESULT_TTL, push_dependents


@dataclass(frozen=True)
class Chain:
    """A pushed chain: its jobs' jids, first to last.

    Attributes:
        jids: one jid per signature, in order.
    """

    jids: tuple[str, ...]

    @property
    def last(self) -> str:
        """The jid of the last job (the chain has succeeded when it has)."""
        return self.jids[-1]


def chain(*signatures: Signature, client: Client | None = None) -> Chain:
    """Push jobs that run one after the other, each once the one before it has succeeded
    (Celery's ``chain``; built on ``after=``): all written in one atomic call, the first
    to its queue, the others waiting outside every queue.

    Each job but the last gets ``store_result`` (its own, or ``CHAIN_RESULT_TTL``) so its
    end is recorded; a job may set ``after_outcome="complete"`` (run after the previous
    one whatever its outcome) or ``on_dependency_death="cancel"`` (dropped instead of the
    dead set when the chain breaks). Unlike Celery, a job's return value is not passed to
    the next one: read it with ``rfetch.result(jid)``.

    Args:
        signatures: two or more ``Job.s(...)``.
        client: the Client to push with (default: the process-wide one).

    Returns:
        The pushed chain's jids.

    Raises:
        ConfigError: fewer than two signatures, one with ``after`` already, or what
            :func:`rfetch.workflow.depend.push_dependents` raises.
    """
    if len(signatures) < 2:
        raise ConfigError("a chain needs at least two signatures (Job.s(...))")
    jobs = []
    for position, sig in enumerate(signatures):
        if not isinstance(sig, Signature):
            raise ConfigError(f"chain takes signatures (Job.s(...)), got {sig!r}")
        options = {**sig.job_class.default_options(), **sig.options}
        if "after" in sig.options:
            raise ConfigError("a chain sets after= itself: leave it out of its signatures")
        if position < len(signatures) - 1:
            options.setdefault("store_result", CHAIN_RESULT_TTL)
        if position > 0:
            options["after"] = "$prev"
        jobs.append((sig.name, list(sig.args), options))
    pushed = push_dependents(client if client is not None else DEFAULT.get(), jobs)
    return Chain(tuple(p.jid for p in pushed))
