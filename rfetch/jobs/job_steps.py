"""``Job.step``: durable steps for any job (the logic is :mod:`rfetch.durable.steps`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from rfetch.durable.steps import StepBook

if TYPE_CHECKING:
    from rfetch.durable.checkpoint import Hold

T = TypeVar("T")


class Steps:
    """The part of :class:`rfetch.Job` that runs durable steps."""

    jid: str = ""
    hold: Hold | None = None
    """The execution's hold on its durable state (steps, an iterable job's cursor), with
    the fence that guards it; None outside a worker."""
    _steps: StepBook | None = None

    def step(self, name: str, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` once per job and record its result (durable steps): every
        later execution of this job (a retry, recovery after kill -9, a push-back at TERM)
        returns the recorded result instead (docs/durable-jobs.md). Inside an iterable
        job's item the step belongs to that item.

        Args:
            name: unique within the job (within the item); a str.
            fn: the step; its result must be native JSON (returned as JSON reads it back).

        Raises:
            rfetch.StepError: a duplicate or bad name; a result not JSON or over 512 KiB.
            rfetch.CheckpointRefused: another process owns the job now.
        """
        if self._steps is None:
            self._steps = StepBook(self.hold, self.jid)
        return self._steps.run(name, fn, args)
