"""Batches (Sidekiq Pro): :class:`Batch`, :class:`BatchStatus`. See docs/workflows.md."""

from rfetch.batch.batch import Batch
from rfetch.batch.status import BatchStatus

__all__ = ["Batch", "BatchStatus"]
