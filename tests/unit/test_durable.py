"""Iterable jobs and durable steps without Redis: the ready enumerators resume after their
cursor, the loop's hooks and checkpoints (a recording hold), the class checks, and the
step rules (unique names, JSON results, a size limit)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

import rfetch
from rfetch.durable.checkpoint import Hold, IterationState
from rfetch.durable.enumerators import (
    csv_enumerator,
    id_windows,
    keyset_enumerator,
    list_enumerator,
    nested_enumerator,
    range_enumerator,
)
from rfetch.durable.iteration import IterationRun
from rfetch.jobs.job_control import JobControl
from rfetch.store.checkpoint_commands import Written


def test_range_and_list_resume_after_their_cursor() -> None:
    assert list(range_enumerator(0, 4, cursor=None)) == [(0, 0), (1, 1), (2, 2), (3, 3)]
    assert list(range_enumerator(0, 10, 3, cursor=3)) == [(6, 6), (9, 9)]
    assert list(list_enumerator(["a", "b", "c"], cursor=0)) == [("b", 1), ("c", 2)]


def test_id_windows_cover_every_id_once() -> None:
    assert list(id_windows(1, 10, 4, cursor=None)) == [((1, 4), 4), ((5, 8), 8), ((9, 10), 10)]
    assert list(id_windows(1, 10, 4, cursor=8)) == [((9, 10), 10)]
    with pytest.raises(ValueError, match="size"):
        list(id_windows(1, 10, 0, cursor=None))


def test_csv_rows_resume_after_the_row_number(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    path.write_text("id,name\n1,a\n2,b\n3,c\n")
    assert [row["id"] for row, _ in csv_enumerator(path, cursor=None)] == ["1", "2", "3"]
    assert list(csv_enumerator(path, cursor=1)) == [({"id": "3", "name": "c"}, 2)]


def test_keyset_walk_asks_for_rows_after_the_last_key() -> None:
    rows = list(range(1, 8))
    asked: list[Any] = []

    def fetch(after: Any, limit: int) -> list[int]:
        asked.append(after)
        return [r for r in rows if after is None or r > after][:limit]

    assert [c for _, c in keyset_enumerator(fetch, lambda r: r, 3, cursor=2)] == [3, 4, 5, 6, 7]
    assert asked == [2, 5]


def test_nested_walk_resumes_inside_the_outer_item() -> None:
    def outer(cursor: Any) -> Iterator[tuple[str, int]]:
        return ((s, i) for s, i in list_enumerator(["x", "y"], cursor=cursor))

    def inner(shop: str, cursor: Any) -> Iterator[tuple[str, int]]:
        return ((f"{shop}{n}", n) for n, _ in range_enumerator(0, 3, cursor=cursor))

    walk = list(nested_enumerator(outer, inner, cursor=None))
    assert [item for item, _ in walk] == ["x0", "x1", "x2", "y0", "y1", "y2"]
    resumed = list(nested_enumerator(outer, inner, cursor=walk[3][1]))
    assert [item for item, _ in resumed] == ["y1", "y2"]


class FakeHold:
    """A hold that records what would be written, owning the job until ``lost``."""

    def __init__(self, state: IterationState | None = None) -> None:
        self.state = state or IterationState()
        self.saved: list[Any] = []
        self.finished = False
        self.lost = False

    def load_iteration(self) -> IterationState:
        return IterationState.parse(self.state.fields())

    def save_iteration(self, state: IterationState, drop: list[str] | None = None) -> Written:
        if self.lost:
            raise rfetch.CheckpointRefused("lost")
        self.saved.append(state.cursor)
        return Written(True, None)

    def finish_iteration(self, steps: bool = False) -> None:
        self.finished = True


class Ten(rfetch.IterableJob):
    checkpoint_interval = 3600.0
    checkpoint_every = 4

    def __init__(self) -> None:
        self.seen: list[int] = []
        self.hooks: list[str] = []

    def build_enumerator(self, *, cursor: int | None) -> Iterator[tuple[int, int]]:
        return range_enumerator(0, 10, cursor=cursor)

    def each_iteration(self, item: int) -> None:
        self.seen.append(item)
        if item == 6 and "fail" in self.hooks:
            raise RuntimeError("item 6")

    def on_start(self) -> None:
        self.hooks.append("start")

    def on_resume(self) -> None:
        self.hooks.append("resume")

    def on_stop(self) -> None:
        self.hooks.append("stop")

    def on_complete(self) -> None:
        self.hooks.append("complete")


def _run(job: Ten, hold: FakeHold, control: JobControl | None = None) -> None:
    IterationRun(job, [], cast(Hold, hold), control).run()


def test_checkpoints_every_n_items_and_completes() -> None:
    job, hold = Ten(), FakeHold()
    _run(job, hold)
    assert job.seen == list(range(10))
    assert hold.saved == [3, 7] and hold.finished
    assert job.hooks == ["start", "stop", "complete"]


def test_a_failure_saves_the_cursor_of_the_last_item_done() -> None:
    job, hold = Ten(), FakeHold()
    job.hooks.append("fail")
    with pytest.raises(RuntimeError, match="item 6"):
        _run(job, hold)
    assert hold.saved[-1] == 5 and not hold.finished
    again = Ten()
    _run(again, FakeHold(IterationState(1, 5, 0.0)))
    assert again.seen == [6, 7, 8, 9] and again.hooks[0] == "resume"


def test_quiet_interrupts_at_the_next_item_with_the_cursor_saved() -> None:
    job, hold = Ten(), FakeHold()
    control = JobControl(None, 1.0, stopping=lambda: len(job.seen) >= 2)
    with pytest.raises(rfetch.JobInterrupted):
        _run(job, hold, control)
    assert job.seen == [0, 1] and hold.saved == [1] and job.hooks[-1] == "stop"


def test_a_cancel_is_honoured_at_the_next_item() -> None:
    job, hold = Ten(), FakeHold()
    control = JobControl(None, 1.0)
    job.each_iteration = lambda item: (job.seen.append(item), control.cancel("enough"))  # type: ignore[method-assign]
    with pytest.raises(rfetch.JobCancelled, match="enough"):
        _run(job, hold, control)
    assert job.seen == [0] and hold.saved == [0]


def test_a_refused_checkpoint_stops_the_job() -> None:
    job, hold = Ten(), FakeHold()
    hold.lost = True
    with pytest.raises(rfetch.CheckpointRefused):
        _run(job, hold)
    assert job.seen == [0, 1, 2, 3]


def test_an_enumerator_must_yield_pairs() -> None:
    class Bad(Ten):
        def build_enumerator(self, *, cursor: int | None) -> Any:
            return iter([1, 2])

    with pytest.raises(TypeError, match=r"\(item, cursor\) pairs"):
        _run(Bad(), FakeHold())


def test_class_checks() -> None:
    with pytest.raises(rfetch.ConfigError, match="keyword-only 'cursor'"):
        class NoCursor(rfetch.IterableJob):
            def build_enumerator(self, cursor: Any) -> Any:  # type: ignore[override]
                return []
    with pytest.raises(rfetch.ConfigError, match="checkpoint_interval"):
        class Zero(rfetch.IterableJob):
            checkpoint_interval = 0.0


def test_state_fields_are_sidekiqs() -> None:
    state = IterationState(2, {"id": 7}, 1.5, None)
    assert state.fields() == {"ex": "2", "c": '{"id":7}', "rt": "1.500", "n": "0"}
    assert IterationState.parse({"ex": "x"}) == IterationState()
    with pytest.raises(TypeError, match="native JSON"):
        IterationState(1, object(), 0.0).fields()


def test_steps_run_once_per_name_and_check_their_results() -> None:
    job = rfetch.Job()
    calls: list[int] = []
    assert job.step("a", lambda x: calls.append(x) or x * 2, 21) == 42
    with pytest.raises(rfetch.StepError, match="twice"):
        job.step("a", lambda: 1)
    with pytest.raises(rfetch.StepError, match="not native JSON"):
        job.step("b", lambda: object())
    with pytest.raises(rfetch.StepError, match="over the"):
        job.step("c", lambda: "x" * (600 * 1024))
    assert job.step("d", lambda: (1, 2)) == [1, 2]  # what a replay returns, from JSON
    assert json.dumps(calls) == "[21]"


def test_progress_lines() -> None:
    from rfetch.durable.progress import Progress

    assert Progress(None).line(50, 2.0, 20) == (0.0, "50 items done, 10.0/s")
    percent, text = Progress(1000).line(500, 5.0, 500)
    assert percent == 50.0 and text.startswith("500/1,000 items, 100.0/s, about ")


def test_the_time_limit_restarts_at_every_item() -> None:
    now = [100.0]
    control = JobControl(5.0, 1.0, clock=lambda: now[0])
    assert control.deadline == 105.0
    deadlines: list[float | None] = []

    class Slow(Ten):
        def each_iteration(self, item: int) -> None:
            now[0] += 3.0  # each item 3 s: the whole walk is 30 s, past a 5 s limit
            deadlines.append(control.deadline)

    _run(Slow(), FakeHold(), control)
    assert deadlines == [105.0 + 3.0 * i for i in range(10)]
    assert control.overdue(now[0]) is None


def test_a_cancelled_field_written_by_another_client_is_honoured() -> None:
    class Cancelling(FakeHold):
        def save_iteration(self, state: IterationState, drop: list[str] | None = None
                           ) -> Written:
            super().save_iteration(state, drop)
            return Written(True, "1700000000")  # Sidekiq's cancel! wrote the field

    job, hold = Ten(), Cancelling()
    with pytest.raises(rfetch.JobCancelled):
        _run(job, hold)
    assert job.seen == [0, 1, 2, 3]  # stopped at the item after the checkpoint


def test_a_select_is_walked_by_its_column_in_batches() -> None:
    """``select_enumerator`` with stand-ins for SQLAlchemy's column, select and session
    (SQLAlchemy is not a dependency): the queries it builds, and the rows it yields."""
    from dataclasses import dataclass, field

    from rfetch.durable.enumerators import select_enumerator

    @dataclass
    class Row:
        id: int

    class Column:
        key = "id"

        def __gt__(self, value: int) -> tuple[str, int]:
            return ("gt", value)

    @dataclass
    class Select:
        after: int | None = None
        size: int | None = None
        ordered: bool = False
        log: list[Any] = field(default_factory=list)

        def where(self, clause: tuple[str, int]) -> Select:
            return Select(clause[1], self.size, self.ordered, self.log)

        def order_by(self, column: Column) -> Select:
            return Select(self.after, self.size, True, self.log)

        def limit(self, n: int) -> Select:
            return Select(self.after, n, self.ordered, self.log)

    class Session:
        def scalars(self, query: Select) -> list[Row]:
            assert query.ordered and query.size is not None
            query.log.append(query.after)
            rows = [Row(i) for i in range(1, 8) if query.after is None or i > query.after]
            return rows[:query.size]

    select = Select()
    walk = list(select_enumerator(Session(), select, Column(), cursor=2, batch_size=3))
    assert [c for _, c in walk] == [3, 4, 5, 6, 7]
    assert select.log == [2, 5]


def test_a_push_is_checked_against_build_enumerator() -> None:
    class Shops(rfetch.IterableJob):
        def build_enumerator(self, shop_id: int, region: str = "eu", *,
                             cursor: int | None) -> Iterator[tuple[int, int]]:
            return range_enumerator(0, 1, cursor=cursor)

        def each_iteration(self, item: int, shop_id: int, region: str = "eu") -> None:
            pass

    Shops.check_args([7])
    Shops.check_args([7, "us"])
    wanted = r"Shops.build_enumerator\(shop_id, region=.eu.\) takes 1 to 2"
    with pytest.raises(rfetch.ArgsMismatch, match=wanted):
        Shops.check_args([])
    with pytest.raises(rfetch.ArgsMismatch):
        Shops.check_args([1, 2, 3])
