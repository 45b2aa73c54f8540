"""Long jobs that resume where they stopped: iterable jobs (Sidekiq 7.3's ``IterableJob``
data model) and durable steps, checkpointed under the job's ownership (fenced by the
job's private list). See docs/durable-jobs.md."""

from rfetch.durable import enumerators
from rfetch.durable.iterable import IterableJob

__all__ = ["IterableJob", "enumerators"]
