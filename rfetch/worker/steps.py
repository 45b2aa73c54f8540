"""Server steps: the features the processor runs around ``perform``, in order (Dramatiq's
middleware, Sidekiq's server middleware chain).

A step overrides the hooks it needs; the processor calls each hook of the steps in their
order (:class:`Steps`), only for the steps that override it:

1. ``applies`` then ``before``: before anything of the job runs. ``applies`` is a check
   with no round trip (an async job's ``before`` runs in the loop's executor only when it
   says so); ``before`` may end the job with a named outcome (``"expired"``,
   ``"cancelled"``), which the step has written itself: nothing else of the job runs.
2. ``begin``: the instance is made, just before the chain; sets what the job sees (its
   batch, its progress writer, its checkpoint hold, its arguments). No round trip.
3. ``wrap`` / ``awrap``: around ``perform`` (the user's server middleware); ``wraps`` says
   whether there is anything to wrap (an async job none wraps is awaited without the chain).
4. ``after``: ``perform`` returned; may raise, which fails the execution.
5. On an exception: ``claim`` may take the failure over with a named outcome
   (``"rescheduled"``, ``"interrupted"``) that the step has written itself.
6. ``leaving``: the outcome is decided; called before the processor writes its own end
   (acknowledgement or failure), and after a step's claim.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rfetch.jobs.job import Job
    from rfetch.worker.job_run import JobRun

Perform = Callable[[], None]
"""The rest of the chain around ``perform``."""

AsyncPerform = Callable[[], Awaitable[None]]
"""The rest of an async job's chain around ``perform``."""


class Step:
    """One server step: every hook does nothing until a step overrides it."""

    name = "step"
    """What the step is, in logs and docs."""

    def applies(self, run: JobRun) -> bool:
        """Whether :meth:`before` has anything to do for ``run`` (no round trip)."""
        return False

    def before(self, run: JobRun) -> str | None:
        """Before the job runs: the named outcome that ends it (written by the step), or
        None to go on.

        Raises:
            redis.exceptions.RedisError: a round trip failed (rfetch's own failure).
        """
        return None

    def begin(self, run: JobRun, instance: Job) -> None:
        """Set what ``instance`` sees, just before the chain (no round trip)."""

    def wraps(self, run: JobRun) -> bool:
        """Whether this step's :meth:`wrap` / :meth:`awrap` has anything to do around
        ``run``'s ``perform`` (no round trip); when no step has, an async job's ``perform``
        is awaited without the chain."""
        return True

    def wrap(self, run: JobRun, instance: Job, perform: Perform) -> None:
        """Run ``perform`` (the rest of the chain) inside this step."""
        perform()

    async def awrap(self, run: JobRun, instance: Job, perform: AsyncPerform) -> None:
        """:meth:`wrap` for an async job, on the event loop."""
        await perform()

    def after(self, run: JobRun) -> None:
        """``perform`` returned (its value in ``run.value``).

        Raises:
            Exception: the execution fails with it.
        """

    def claim(self, run: JobRun, exc: BaseException) -> str | None:
        """The named outcome this step gave the failure ``exc`` (written by the step), or
        None to leave it to the next step and the retry."""
        return None

    def leaving(self, run: JobRun, outcome: str) -> None:
        """The outcome is decided: ``"succeeded"`` or ``"failed"`` before the processor
        writes the acknowledgement or the failure; a step's named outcome after its
        :meth:`claim` wrote it."""


def _overrides(step: Step, hook: str) -> bool:
    return getattr(type(step), hook) is not getattr(Step, hook)


class Steps:
    """The ordered steps, and per hook those that override it (so a hook no step uses
    costs nothing per job).

    Args:
        steps: the steps in their order (outermost first).
    """

    def __init__(self, steps: Sequence[Step]) -> None:
        self.all = tuple(steps)
        self.before = tuple(s for s in self.all if _overrides(s, "before"))
        self.begin = tuple(s for s in self.all if _overrides(s, "begin"))
        self.wrap = tuple(s for s in self.all if _overrides(s, "wrap") or _overrides(s, "awrap"))
        self.after = tuple(s for s in self.all if _overrides(s, "after"))
        self.claim = tuple(s for s in self.all if _overrides(s, "claim"))
        self.leaving = tuple(s for s in self.all if _overrides(s, "leaving"))

    def names(self) -> list[str]:
        """The steps' names, in order."""
        return [s.name for s in self.all]

    def start(self, run: JobRun) -> str | None:
        """Run the ``before`` hooks that apply, in order; the first named outcome."""
        for step in self.before:
            if step.applies(run) and (ended := step.before(run)) is not None:
                return ended
        return None

    async def astart(self, run: JobRun) -> str | None:
        """:meth:`start` for an async job: each ``before`` that applies runs in the loop's
        executor, so the loop never waits on Redis."""
        loop = asyncio.get_running_loop()
        for step in self.before:
            if step.applies(run):
                ended = await loop.run_in_executor(None, step.before, run)
                if ended is not None:
                    return ended
        return None

    def prepare(self, run: JobRun, instance: Job) -> None:
        """Run the ``begin`` hooks, in order."""
        for step in self.begin:
            step.begin(run, instance)

    def perform(self, run: JobRun, instance: Job, perform: Perform) -> None:
        """Run ``perform`` inside the wrapping steps (the first outermost)."""
        wrap = self.wrap
        if not wrap:
            perform()
            return
        if len(wrap) == 1:  # the usual list: the user's middleware only
            wrap[0].wrap(run, instance, perform)
            return

        def at(index: int) -> None:
            if index == len(wrap):
                perform()
            else:
                wrap[index].wrap(run, instance, lambda: at(index + 1))

        at(0)

    def wrapping(self, run: JobRun) -> bool:
        """Whether a wrapping step has anything to do around ``run`` (:meth:`Step.wraps`)."""
        return any(step.wraps(run) for step in self.wrap)

    async def aperform(self, run: JobRun, instance: Job, perform: AsyncPerform) -> None:
        """:meth:`perform` for an async job."""
        wrap = self.wrap
        if not wrap:
            await perform()
            return

        async def at(index: int) -> None:
            if index == len(wrap):
                await perform()
            else:
                await wrap[index].awrap(run, instance, lambda: at(index + 1))

        await at(0)

    def finish(self, run: JobRun) -> None:
        """Run the ``after`` hooks, in order (one raising fails the execution)."""
        for step in self.after:
            step.after(run)

    def take(self, run: JobRun, exc: BaseException) -> str | None:
        """The first named outcome a step's ``claim`` gave ``exc``; the ``leaving`` hooks
        then run. None: no step took it."""
        for step in self.claim:
            if (ended := step.claim(run, exc)) is not None:
                self.leave(run, ended)
                return ended
        return None

    def leave(self, run: JobRun, outcome: str) -> None:
        """Run the ``leaving`` hooks, in order."""
        for step in self.leaving:
            step.leaving(run, outcome)
