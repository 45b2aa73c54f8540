"""Long jobs that resume where they stopped: iterable jobs (Sidekiq 7.3's ``IterableJob``
data model) and durable steps, checkpointed under the job's ownership (fenced by the
job's private list). See docs/durable-jobs.md. ``rfetch.IterableJob`` is
:class:`rfetch.durable.iterable.IterableJob`; this package loads only its enumerators, so
that ``Job.step`` (below every feature) can use :mod:`rfetch.durable.steps`."""

from rfetch.durable import enumerators

__all__ = ["enumerators"]
