"""Celery's canvas words on batches: ``rfetch.group`` (a batch with no callbacks) and
``rfetch.chord`` (a batch whose success pushes the callback), from :class:`rfetch.Signature`
(``Job.s(...)``). Both push at once, all jobs in one atomic call (``batch_push.lua``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from rfetch.batch.batch import Batch
from rfetch.batch.status import BatchStatus
from rfetch.errors import ConfigError
from rfetch.jobs.signature import Signature

if TYPE_CHECKING:
    from rfetch.push.client import Client


class GroupResult:
    """A pushed group or chord: its batch's bid and jids (in signature order; a unique job
    whose lock was held is left out), and its status on demand (Celery's ``GroupResult``).

    Attributes:
        bid: the batch id (24 hex).
        jids: the jids of the jobs pushed.
    """

    def __init__(self, batch: Batch) -> None:
        self.batch = batch
        self.bid = batch.bid
        self.jids = list(batch.jids)

    def status(self) -> BatchStatus:
        """The batch's status now.

        Raises:
            BatchNotFound: the batch expired (24 h after success by default).
        """
        return self.batch.status()

    def __repr__(self) -> str:
        return f"<GroupResult bid={self.bid} jobs={len(self.jids)}>"


def _signatures(items: Iterable[Signature | Iterable[Signature]]) -> list[Signature]:
    out: list[Signature] = []
    for item in items:
        if isinstance(item, Signature):
            out.append(item)
        elif isinstance(item, Iterable) and not isinstance(item, (str, bytes)):
            out += _signatures(item)
        else:
            raise ConfigError(f"a group takes signatures (Job.s(...)), not {item!r}")
    if not out:
        raise ConfigError("a group needs at least one signature (an empty batch is an error)")
    return out


def _push(batch: Batch, signatures: Sequence[Signature], client: Client | None) -> GroupResult:
    with batch.jobs():
        for signature in signatures:
            signature.push(client)
    return GroupResult(batch)


def group(
    *signatures: Signature | Iterable[Signature],
    description: str = "",
    client: Client | None = None,
) -> GroupResult:
    """Push the jobs of ``signatures`` (each a ``Job.s(...)``, or iterables of them) as one
    batch with no callback (Celery's ``group(...).delay()``; the jobs run in parallel).

    Raises:
        ConfigError: no signature, or something that is not one.
        BatchError, redis.exceptions.RedisError: as :meth:`rfetch.Batch.jobs`; nothing was
            written.
    """
    sigs = _signatures(signatures)
    return _push(Batch(description or "group", client=client), sigs, client)


def chord(
    header: Iterable[Signature],
    callback: Signature,
    *,
    description: str = "",
    client: Client | None = None,
) -> GroupResult:
    """Push ``header`` as one batch whose success pushes ``callback`` once (Celery's
    ``chord(header, body)``), with the signature's own arguments only (no header results:
    as Celery's immutable ``body.si(...)``, and as ``rfetch.chain``); the header's outcome is
    read with :class:`rfetch.BatchStatus` of :attr:`GroupResult.bid`, or ``rfetch.result``
    of its jids for jobs with ``store_result``. If a job of the header dies, the callback
    never runs (Celery's chord error); the batch's death shows it.

    Raises:
        ConfigError: an empty header, or a callback that is not a signature.
        BatchError, redis.exceptions.RedisError: as :meth:`rfetch.Batch.jobs`.
    """
    if not isinstance(callback, Signature):
        raise ConfigError(f"a chord's callback is a signature (Job.s(...)), not {callback!r}")
    sigs = _signatures(header)
    batch = Batch(description or f"chord -> {callback.name}", on_success=callback,
                  client=client)
    return _push(batch, sigs, client)
