"""Client and server middleware chains (Sidekiq's middleware, in Python form).

Sidekiq's client middleware is ``call(job_class, job, queue, redis_pool) { yield }`` and its
server middleware ``call(job_instance, job, queue) { yield }``. Python has no blocks, so the
rest of the chain is passed as ``call_next``:

    def audit(job_class, job, queue, redis, call_next):
        job["tags"] = job.get("tags", []) + ["audited"]
        return call_next()          # return None instead to stop the push

    def timing(job, payload, queue, call_next):
        started = time.monotonic()
        try:
            call_next()
        finally:
            log(payload["jid"], time.monotonic() - started)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from redis import Redis

    from rfetch.job import Job

Payload = dict[str, Any]


class ClientMiddleware(Protocol):
    """Runs around each push; return ``call_next()`` to go on, or None to drop the push."""

    def __call__(
        self,
        job_class: str,
        job: Payload,
        queue: str,
        redis: Redis,
        call_next: Callable[[], Payload | None],
    ) -> Payload | None: ...


class ServerMiddleware(Protocol):
    """Runs around each job execution; must call ``call_next()`` for the job to run."""

    def __call__(
        self, job: Job, payload: Payload, queue: str, call_next: Callable[[], None]
    ) -> None: ...


def run_client_chain(
    chain: Sequence[ClientMiddleware], job_class: str, job: Payload, queue: str, redis: Redis
) -> Payload | None:
    """Run ``job`` through the client chain; the payload to push, or None if stopped."""

    def step(index: int) -> Payload | None:
        if index == len(chain):
            return job
        return chain[index](job_class, job, queue, redis, lambda: step(index + 1))

    return step(0)


def run_server_chain(
    chain: Sequence[ServerMiddleware],
    job: Job,
    payload: Payload,
    queue: str,
    perform: Callable[[], object],
) -> None:
    """Run ``perform`` inside the server chain (its return value is not used)."""

    def step(index: int) -> None:
        if index == len(chain):
            perform()
        else:
            chain[index](job, payload, queue, lambda: step(index + 1))

    step(0)
