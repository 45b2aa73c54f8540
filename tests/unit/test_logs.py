"""Log lines: text and JSON formats, the writer thread, and the per-job fast path."""

from __future__ import annotations

import io
import json
import logging
import os
import queue
import re
import threading
import time
from collections.abc import Iterator

import pytest

from rfetch.observability.logs import (
    BUSY_BATCH,
    DirectHandler,
    HandOffHandler,
    Item,
    JobEvent,
    JobLog,
    JsonFormatter,
    LogWriter,
    TextFormatter,
    setup_direct_logging,
    setup_logging,
)
from tests.support.wait import wait_for

JID = "0123456789abcdef01234567"


@pytest.fixture
def wired() -> Iterator[tuple[logging.Logger, io.StringIO, LogWriter]]:
    """A private 'rfetchtest' logger wired as setup_logging wires 'rfetch', writing to a
    StringIO. (Tests re-wire it in their body with :func:`rewire`: pytest adds its capture
    handlers to non-propagating loggers between fixture set-up and the test call.)"""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    formatter = TextFormatter()
    handler.setFormatter(formatter)
    items: queue.SimpleQueue[Item] = queue.SimpleQueue()
    writer = LogWriter(items, handler, formatter)
    root = logging.getLogger("rfetchtest")
    root.handlers[:] = [HandOffHandler(items)]
    root.setLevel(logging.INFO)
    root.propagate = False
    writer.start()
    try:
        yield root, stream, writer
    finally:
        writer.stop()
        root.handlers[:] = []


def rewire(root: logging.Logger) -> None:
    """Keep only the HandOffHandler, as setup_logging leaves the 'rfetch' logger."""
    root.handlers[:] = [h for h in root.handlers if isinstance(h, HandOffHandler)]


def test_job_events_and_records_keep_their_order(
    wired: tuple[logging.Logger, io.StringIO, LogWriter],
) -> None:
    root, stream, writer = wired
    rewire(root)
    job_logger = root.getChild("job")
    job_log = JobLog(job_logger)
    assert job_log._items is not None, "the fast path applies when rfetch's wiring is in place"
    job_log.event("start", "app.Send", JID, "mail", None)
    root.warning("between %s", "lines")
    job_log.event("done", "app.Send", JID, "mail", 1.5)
    writer.stop()
    lines = stream.getvalue().splitlines()
    tid = f"{threading.get_ident():x}"
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
    assert re.fullmatch(
        rf"{stamp} pid={os.getpid()} tid={tid} class=app\.Send jid={JID} INFO: start", lines[0]
    )
    assert lines[1].endswith("WARNING: between lines")
    assert re.fullmatch(
        rf"{stamp} pid={os.getpid()} tid={tid} class=app\.Send jid={JID} elapsed=1\.5ms "
        "INFO: done",
        lines[2],
    )
    assert len(lines) == 3


def test_event_line_matches_the_record_line() -> None:
    formatter = TextFormatter()
    record = logging.LogRecord("rfetch.job", logging.INFO, __file__, 1, "done", None, None)
    record.job_class, record.jid, record.queue, record.elapsed_ms = "a.B", JID, "q", 2.0
    event = JobEvent(record.created, record.thread or 0, "done", "a.B", JID, "q", 2.0, "x")
    assert formatter.format_event(event, record.process or 0) == formatter.format(record)


def test_event_lines_in_one_millisecond_keep_their_own_thread_and_time() -> None:
    """The formatter reuses a millisecond's time stamp and a thread's fixed part: each line
    still carries its own thread, elapsed time and millisecond."""
    formatter = TextFormatter()
    at = 1_800_000_000.2505
    lines = [
        formatter.format_event(JobEvent(at, 0xA, "start", "a.B", JID, "q", None, "x"), 7),
        formatter.format_event(JobEvent(at, 0xB, "done", "a.B", JID, "q", 1.5, "x"), 7),
        formatter.format_event(JobEvent(at + 0.001, 0xA, "done", "c.D", JID, "q", 2.0, "x"), 8),
        formatter.format_event(JobEvent(at + 1, 0xA, "start", "c.D", JID, "q", None, "x"), 8),
    ]
    assert lines == [
        f"2027-01-15T08:00:00.250Z pid=7 tid=a class=a.B jid={JID} INFO: start",
        f"2027-01-15T08:00:00.250Z pid=7 tid=b class=a.B jid={JID} elapsed=1.5ms INFO: done",
        f"2027-01-15T08:00:00.251Z pid=8 tid=a class=c.D jid={JID} elapsed=2.0ms INFO: done",
        f"2027-01-15T08:00:01.250Z pid=8 tid=a class=c.D jid={JID} INFO: start",
    ]


def test_json_event_has_the_record_fields() -> None:
    formatter = JsonFormatter()
    record = logging.LogRecord("rfetch.job", logging.INFO, __file__, 1, "done", None, None)
    record.job_class, record.jid, record.queue, record.elapsed_ms = "a.B", JID, "q", 2.0
    event = JobEvent(record.created, record.thread or 0, "done", "a.B", JID, "q", 2.0, "rfetch.job")
    assert json.loads(formatter.format_event(event, record.process or 0)) == json.loads(
        formatter.format(record)
    )


def test_info_off_writes_nothing(wired: tuple[logging.Logger, io.StringIO, LogWriter]) -> None:
    root, stream, writer = wired
    rewire(root)
    job_logger = root.getChild("quietjob")
    job_logger.setLevel(logging.WARNING)
    JobLog(job_logger).event("start", "a.B", JID, "q", None)
    writer.stop()
    assert stream.getvalue() == ""


def test_application_logging_gets_ordinary_records(caplog: pytest.LogCaptureFixture) -> None:
    """Without rfetch's wiring (an embedding app configured logging), lines are records
    with the job fields as attributes, so the app's handlers and filters see them."""
    logger = logging.getLogger("appconfigured.job")
    job_log = JobLog(logger)
    assert job_log._items is None
    with caplog.at_level(logging.INFO, logger="appconfigured.job"):
        job_log.event("done", "a.B", JID, "q", 3.25)
    [record] = caplog.records
    assert record.getMessage() == "done"
    assert (record.job_class, record.jid, record.queue, record.elapsed_ms) == (
        "a.B",
        JID,
        "q",
        3.25,
    )


def test_a_filter_on_the_way_disables_the_fast_path(
    wired: tuple[logging.Logger, io.StringIO, LogWriter],
) -> None:
    root, _, _ = wired
    rewire(root)
    child = root.getChild("filtered")
    child.addFilter(lambda record: True)
    assert JobLog(child)._items is None


def _event(message: str) -> JobEvent:
    return JobEvent(time.time(), 1, message, "a.B", JID, "q", None, "rfetch.job")


def _writer(interval: float) -> tuple[queue.SimpleQueue[Item], io.StringIO, LogWriter]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    formatter = TextFormatter()
    handler.setFormatter(formatter)
    items: queue.SimpleQueue[Item] = queue.SimpleQueue()
    return items, stream, LogWriter(items, handler, formatter, interval=interval)


def test_an_idle_writer_writes_a_line_at_once() -> None:
    items, stream, writer = _writer(interval=60.0)
    writer.start()
    try:
        items.put(_event("alone"))
        wait_for(lambda: "alone" in stream.getvalue(), 30, "the line to be written", step=0.01)
        assert stream.getvalue().endswith("INFO: alone\n")
    finally:
        writer.stop()


def test_a_busy_writer_gathers_lines_and_stop_writes_them() -> None:
    """After a batch of BUSY_BATCH lines or more the writer waits ``interval`` before it
    looks again, so a line handed over meanwhile is not written yet; stop() writes it."""
    items, stream, writer = _writer(interval=60.0)
    for i in range(BUSY_BATCH * 2):  # waiting before the writer starts: one batch
        items.put(_event(f"burst {i}"))
    writer.start()
    wait_for(
        lambda: stream.getvalue().count("\n") >= BUSY_BATCH,
        60,
        "the first batch to be written",
        step=0.01,
    )
    written = stream.getvalue().count("\n")
    assert written >= BUSY_BATCH
    items.put(_event("late"))
    time.sleep(0.3)  # a negative: the line must not be written within this span
    assert "late" not in stream.getvalue(), "a busy writer waits instead of waking per line"
    started = time.monotonic()
    writer.stop()
    assert time.monotonic() - started < 30, "stop cuts the 60 s wait short"
    lines = stream.getvalue().splitlines()
    assert [line.rsplit("INFO: ", 1)[1] for line in lines] == [
        *(f"burst {i}" for i in range(BUSY_BATCH * 2)),
        "late",
    ]


def test_a_record_with_a_traceback_is_frozen_at_hand_off() -> None:
    """The traceback is formatted in the calling thread (its frames as they were), and the
    text and JSON formatters both write it."""
    items: queue.SimpleQueue[Item] = queue.SimpleQueue()
    handler = HandOffHandler(items)
    logger = logging.getLogger("rfetchtest.frozen")
    logger.handlers[:] = [handler]
    logger.propagate = False
    try:
        raise KeyError("missing")
    except KeyError:
        logger.warning("fail: %s", "KeyError", exc_info=True)
    record = items.get_nowait()
    assert isinstance(record, logging.LogRecord)
    assert record.exc_info is None and record.exc_text is not None
    assert record.exc_text.startswith("Traceback (most recent call last):")
    assert record.exc_text.endswith("KeyError: 'missing'")
    text = TextFormatter().format(record)
    assert text.splitlines()[0].endswith("WARNING: fail: KeyError")
    assert text.splitlines()[-1] == "KeyError: 'missing'"
    assert json.loads(JsonFormatter().format(record))["exc"] == record.exc_text


def test_an_eager_handler_freezes_the_message_of_a_mutable_argument() -> None:
    items: queue.SimpleQueue[Item] = queue.SimpleQueue()
    logger = logging.getLogger("rfetchtest.eager")
    logger.handlers[:] = [HandOffHandler(items, eager=True)]
    logger.propagate = False
    logger.setLevel(logging.INFO)  # not the root's level, which depends on earlier tests
    cart = ["apple"]
    logger.info("cart %s", cart)
    cart.append("pear")  # the application goes on changing its object
    record = items.get_nowait()
    assert isinstance(record, logging.LogRecord)
    assert record.getMessage() == "cart ['apple']"


@pytest.fixture
def saved_loggers() -> Iterator[None]:
    """setup_logging configures the "rfetch" and the root logger; put them back."""
    loggers = [logging.getLogger("rfetch"), logging.getLogger()]
    saved = [(lg.handlers[:], lg.level, lg.propagate) for lg in loggers]
    yield
    for logger, (handlers, level, propagate) in zip(loggers, saved, strict=True):
        logger.handlers[:], logger.level, logger.propagate = handlers, level, propagate


@pytest.mark.usefixtures("saved_loggers")
def test_setup_logging_takes_the_root_logger_unless_the_application_configured_it() -> None:
    root = logging.getLogger()
    root.handlers[:] = []
    setup_direct_logging(False, False)
    assert [type(h) for h in root.handlers] == [DirectHandler]
    writer = setup_logging(True, False)
    writer.stop()
    assert [type(h) for h in root.handlers] == [HandOffHandler]
    assert root.level == logging.DEBUG

    own = logging.StreamHandler(io.StringIO())  # as dictConfig in a -r module would
    root.handlers[:] = [own]
    root.setLevel(logging.ERROR)
    writer = setup_logging(False, False)
    writer.stop()
    assert root.handlers == [own] and root.level == logging.ERROR


def test_a_line_that_cannot_be_written_does_not_end_the_writer(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A line whose formatting raises is dropped (said once on stderr); the lines after it,
    in the same batch and later ones, are written, and stop() still returns."""
    items, stream, writer = _writer(interval=0.0)
    broken = _event("broken")._replace(created="not a time")  # type: ignore[arg-type]
    for _ in range(3):
        items.put(broken)
    items.put(_event("same batch"))
    writer.start()
    try:
        wait_for(lambda: "same batch" in stream.getvalue(), 30, "the next line", step=0.01)
        items.put(_event("later"))
        wait_for(lambda: "later" in stream.getvalue(), 30, "a later line", step=0.01)
    finally:
        writer.stop()
    assert "broken" not in stream.getvalue()
    assert capsys.readouterr().err.count("dropped a line") == 1
