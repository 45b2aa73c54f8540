"""rfetch: reliable background jobs on Redis, with Sidekiq's data model.

Public API::

    import rfetch

    class SendWelcome(rfetch.Job):
        queue = "mail"
        def perform(self, user_id: int) -> None: ...

    rfetch.configure(redis_url="redis://localhost:6379/0")
    SendWelcome.perform_async(42)
"""

from rfetch.batch import Batch, BatchStatus
from rfetch.batch.canvas import GroupResult, chord, group
from rfetch.config import Config, QueueSpec
from rfetch.durable.iterable import IterableJob
from rfetch.errors import (
    ArgsMismatch,
    ArgsNotSerializable,
    BatchError,
    BatchNotFound,
    BufferFull,
    CheckpointRefused,
    ConfigError,
    DuplicateJobName,
    InvalidJob,
    JobCancelled,
    JobDied,
    JobInterrupted,
    JobTimeout,
    LimiterKeyError,
    OverLimit,
    PayloadTooLarge,
    QueueFull,
    ResultNotSerializable,
    ResultTimeout,
    RfetchError,
    StepError,
    UnknownJob,
    UnknownResult,
    UnrunnableJobWarning,
)
from rfetch.jobs.job import Job
from rfetch.jobs.job_function import JobFunction, job
from rfetch.jobs.signature import Signature
from rfetch.limiter import Limiter
from rfetch.periodic import is_leader
from rfetch.push.client import Client, configure
from rfetch.version import __version__
from rfetch.workflow.chain import Chain, chain
from rfetch.workflow.results import aresult, result

__all__ = [
    "ArgsMismatch",
    "ArgsNotSerializable",
    "Batch",
    "BatchError",
    "BatchNotFound",
    "BatchStatus",
    "BufferFull",
    "Chain",
    "CheckpointRefused",
    "Client",
    "Config",
    "ConfigError",
    "DuplicateJobName",
    "GroupResult",
    "InvalidJob",
    "IterableJob",
    "Job",
    "JobCancelled",
    "JobDied",
    "JobFunction",
    "JobInterrupted",
    "JobTimeout",
    "Limiter",
    "LimiterKeyError",
    "OverLimit",
    "PayloadTooLarge",
    "QueueFull",
    "QueueSpec",
    "ResultNotSerializable",
    "ResultTimeout",
    "RfetchError",
    "Signature",
    "StepError",
    "UnknownJob",
    "UnknownResult",
    "UnrunnableJobWarning",
    "__version__",
    "aresult",
    "chain",
    "chord",
    "configure",
    "group",
    "is_leader",
    "job",
    "result",
]
