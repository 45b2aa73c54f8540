"""rfetch: reliable background jobs on Redis, with Sidekiq's data model.

Public API::

    import rfetch

    class SendWelcome(rfetch.Job):
        queue = "mail"
        def perform(self, user_id: int) -> None: ...

    rfetch.configure(redis_url="redis://localhost:6379/0")
    SendWelcome.perform_async(42)
"""

from rfetch.client import Client, configure
from rfetch.config import Config, QueueSpec
from rfetch.errors import (
    ArgsMismatch,
    ArgsNotSerializable,
    BufferFull,
    ConfigError,
    DuplicateJobName,
    InvalidJob,
    JobCancelled,
    JobTimeout,
    LimiterKeyError,
    OverLimit,
    PayloadTooLarge,
    QueueFull,
    RfetchError,
    UnknownJob,
    UnrunnableJobWarning,
)
from rfetch.job import Job
from rfetch.job_function import JobFunction, job
from rfetch.limiter import Limiter
from rfetch.periodic import is_leader
from rfetch.version import __version__

__all__ = [
    "ArgsMismatch",
    "ArgsNotSerializable",
    "BufferFull",
    "Client",
    "Config",
    "ConfigError",
    "DuplicateJobName",
    "InvalidJob",
    "Job",
    "JobCancelled",
    "JobFunction",
    "JobTimeout",
    "Limiter",
    "LimiterKeyError",
    "OverLimit",
    "PayloadTooLarge",
    "QueueFull",
    "QueueSpec",
    "RfetchError",
    "UnknownJob",
    "UnrunnableJobWarning",
    "__version__",
    "configure",
    "is_leader",
    "job",
]
