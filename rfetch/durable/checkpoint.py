"""A running job's hold on its durable state: where its checkpoints go and the fence that
guards them (the job's exact payload in this process's private list)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from rfetch.errors import CheckpointRefused
from rfetch.store.checkpoint_commands import CheckpointCommands, Written


@dataclass
class IterationState:
    """An iterable job's state as ``it-<jid>`` holds it (Sidekiq 7.3's fields).

    Attributes:
        executions: times the job started (``ex``), this execution included once begun.
        cursor: the cursor of the last item done (``c``, JSON), None before the first.
        runtime: seconds spent iterating over every execution so far (``rt``).
        cancelled: epoch seconds of a cancel (``cancelled``), or None.
        done: items done over every execution (``n``: rfetch's own field, which Sidekiq
            ignores; the progress shown on the busy page, explain and the API).
    """

    executions: int = 0
    cursor: Any = None
    runtime: float = 0.0
    cancelled: str | None = None
    done: int = 0

    @classmethod
    def parse(cls, fields: dict[str, str]) -> IterationState:
        """The state read from the hash's fields (absent or unreadable fields: defaults,
        so a hash written by hand or by another version starts over rather than crash)."""
        try:
            cursor = json.loads(fields["c"]) if "c" in fields else None
        except ValueError:
            cursor = None
        try:
            executions = int(fields.get("ex", "0"))
            runtime = float(fields.get("rt", "0"))
            done = int(fields.get("n", "0"))
        except ValueError:
            executions, runtime, done = 0, 0.0, 0
        return cls(executions, cursor, runtime, fields.get("cancelled"), done)

    def fields(self) -> dict[str, str]:
        """The hash fields to write (``cancelled`` only once set).

        Raises:
            TypeError: the cursor is not native JSON (message names it).
        """
        try:
            cursor = json.dumps(self.cursor, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"an iterable job's cursor must be native JSON (str, int, float, bool, None, "
                f"list, dict): {self.cursor!r} is not ({exc})"
            ) from None
        out = {"ex": str(self.executions), "c": cursor, "rt": f"{self.runtime:.3f}",
               "n": str(self.done)}
        if self.cancelled is not None:
            out["cancelled"] = self.cancelled
        return out


@dataclass
class Hold:
    """One execution's hold on its job's durable state, given to the job by the worker.

    Every write is fenced (``checkpoint.lua``): it happens only while ``raw`` is still in
    ``private_key``; a refused write raises :class:`rfetch.CheckpointRefused`.

    Attributes:
        commands: the checkpoint commands.
        private_key: the private list the job was fetched into.
        raw: the payload exactly as fetched.
        jid: the job's jid.
        writes: fenced writes made (a benchmark counts round trips with it).
    """

    commands: CheckpointCommands
    private_key: str
    raw: bytes
    jid: str
    writes: int = field(default=0)

    def load_iteration(self) -> IterationState:
        """The iterable job's state (one HGETALL of ``it-<jid>``)."""
        return IterationState.parse(self.commands.read(self.commands.keys.iteration(self.jid)))

    def save_iteration(self, state: IterationState, drop: list[str] | None = None) -> Written:
        """Write ``state`` to ``it-<jid>`` (and drop ``drop`` from the step results).

        Raises:
            CheckpointRefused: another process owns the job now.
            TypeError: the cursor is not native JSON.
        """
        if drop:
            self._write(self.commands.keys.steps(self.jid), {}, drop)
        return self._write(self.commands.keys.iteration(self.jid), state.fields(), ())

    def finish_iteration(self, steps: bool = False) -> None:
        """Delete ``it-<jid>`` at completion (Sidekiq unlinks it too), and the step results
        when ``steps``.

        Raises:
            CheckpointRefused: another process owns the job now.
        """
        keys = self.commands.keys
        for target in [keys.iteration(self.jid)] + ([keys.steps(self.jid)] if steps else []):
            self.writes += 1
            if not self.commands.delete(self.private_key, self.raw, target):
                raise self._refused()

    def load_steps(self) -> dict[str, str]:
        """The recorded step results: name -> JSON text (one HGETALL)."""
        return self.commands.read(self.commands.keys.steps(self.jid))

    def save_step(self, name: str, text: str) -> None:
        """Record one step's JSON result.

        Raises:
            CheckpointRefused: another process owns the job now.
        """
        self._write(self.commands.keys.steps(self.jid), {name: text}, ())

    def _write(self, target: str, fields: dict[str, str], drop: Any) -> Written:
        self.writes += 1
        written = self.commands.write(self.private_key, self.raw, target, fields, list(drop))
        if not written.owned:
            raise self._refused()
        return written

    def _refused(self) -> CheckpointRefused:
        return CheckpointRefused(
            f"checkpoint of jid={self.jid} refused: the job is no longer in "
            f"{self.private_key} (this process stalled and another one owns it now); "
            "stopping without touching it"
        )


def now() -> str:
    """Epoch seconds as text, as Sidekiq writes ``cancelled``."""
    return str(int(time.time()))
