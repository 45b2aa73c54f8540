"""Durable steps (``Job.step``): a step's result is recorded once, fenced, and every later
execution of the same job (a retry, recovery after kill -9, a push-back at TERM) returns
the recorded result instead of running the step again (the durable-execution rule of
Temporal activities, DBOS steps, Hatchet and Inngest)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from rfetch.durable.checkpoint import Hold
from rfetch.errors import StepError

T = TypeVar("T")

MAX_STEP_BYTES = 512 * 1024
"""Largest step result recorded, in bytes of JSON (UTF-8): a step records a result, not a
data set (keep large data elsewhere and record its key)."""


class StepBook:
    """The steps of one execution of one job.

    Args:
        hold: the execution's hold (None outside a worker: steps run, nothing is kept).
        jid: the job's jid (error messages).
    """

    def __init__(self, hold: Hold | None, jid: str) -> None:
        self.hold = hold
        self.jid = jid
        self._recorded: dict[str, str] | None = None
        self._used: set[str] = set()
        self.scoped = False
        self.scope: Any = None
        """The cursor of the item an iterable job is running (steps then belong to that
        item) when ``scoped``."""
        self.item_names: list[str] = []
        """Names recorded under the current item."""
        self.done_names: list[str] = []
        """Names recorded under items now done (deleted at the next checkpoint)."""

    def run(self, name: str, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        """Run step ``name`` once per job (see :meth:`rfetch.Job.step`).

        Raises:
            StepError: a bad or duplicate name, a result that is not native JSON or is
                larger than :data:`MAX_STEP_BYTES`.
            CheckpointRefused: another process owns the job now (the result is not kept).
        """
        if not isinstance(name, str) or not name:
            raise StepError(f"a step's name must be a non-empty string, got {name!r}")
        key = name if not self.scoped else f"{json.dumps(self.scope)}/{name}"
        if key in self._used:
            raise StepError(
                f"step {name!r} ran twice in one execution of jid={self.jid}: step names "
                "must be unique within a job (within an item, for an iterable job)"
            )
        self._used.add(key)
        recorded = self._load().get(key)
        if recorded is not None:
            return json.loads(recorded)  # type: ignore[no-any-return]
        value = fn(*args)
        text = _text(name, value)
        if self.hold is not None:
            self.hold.save_step(key, text)
            if self.scoped:
                self.item_names.append(key)
        self._load()[key] = text
        return json.loads(text)  # type: ignore[no-any-return]

    def enter_item(self, cursor: Any) -> None:
        """Steps from now on belong to the item whose cursor is ``cursor``."""
        self.scoped, self.scope = True, cursor

    def item_done(self) -> None:
        """The current item is done: its steps' results may go at the next checkpoint."""
        self.done_names += self.item_names
        self.item_names = []

    def take_done(self) -> list[str]:
        """The names to delete at this checkpoint (forgotten here)."""
        names, self.done_names = self.done_names, []
        return names

    @property
    def used(self) -> bool:
        """Whether a step ran or was read in this execution."""
        return self._recorded is not None

    def _load(self) -> dict[str, str]:
        if self._recorded is None:
            self._recorded = self.hold.load_steps() if self.hold is not None else {}
        return self._recorded


def _text(name: str, value: object) -> str:
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise StepError(
            f"step {name!r} returned {type(value).__name__}, which is not native JSON "
            f"({exc}): return str, int, float, bool, None, list or dict with str keys"
        ) from None
    size = len(text.encode())
    if size > MAX_STEP_BYTES:
        raise StepError(
            f"step {name!r} returned {size} bytes of JSON, over the {MAX_STEP_BYTES} bytes a "
            "step may record: store large data elsewhere and return its key"
        )
    return text
