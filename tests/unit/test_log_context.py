"""The running job on the application's log records (JobContext) and print output as log
lines (PrintToLog)."""

from __future__ import annotations

import contextvars
import io
import logging
import threading

from rfetch.observability.log_context import JobContext, PrintToLog

JID = "0123456789abcdef01234567"


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def wired(name: str, context: JobContext | None = None) -> tuple[logging.Logger, Collect]:
    logger = logging.getLogger(name)
    collect = Collect()
    if context is not None:
        collect.addFilter(context)
    logger.handlers[:] = [collect]
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    return logger, collect


def test_records_carry_the_running_job_only_while_it_runs() -> None:
    context = JobContext()
    logger, collect = wired("rfetchtest.ctx", context)
    logger.info("before")
    token = context.enter("app.Bill", JID, "mail")
    logger.info("during")
    logger.info("own fields win", extra={"jid": "other", "job_class": "x", "queue": "q"})
    context.leave(token)
    logger.info("after")
    fields = [(getattr(r, "job_class", None), getattr(r, "jid", None)) for r in collect.records]
    assert fields == [(None, None), ("app.Bill", JID), ("x", "other"), (None, None)]
    assert collect.records[1].queue == "mail"  # type: ignore[attr-defined]


def test_each_thread_sees_its_own_job() -> None:
    context = JobContext()
    logger, collect = wired("rfetchtest.threads", context)
    entered = threading.Barrier(2)

    def job(jid: str) -> None:
        def run() -> None:
            context.enter("app.Job", jid, "default")
            entered.wait()
            logger.info("from %s", jid)

        contextvars.copy_context().run(run)

    threads = [threading.Thread(target=job, args=(j,)) for j in ("a" * 24, "b" * 24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted((r.getMessage(), r.jid) for r in collect.records) == [  # type: ignore[attr-defined]
        ("from " + "a" * 24, "a" * 24),
        ("from " + "b" * 24, "b" * 24),
    ]
    assert context.current() is None


def test_print_becomes_one_record_per_line() -> None:
    logger, collect = wired("rfetchtest.stdout")
    original = io.StringIO()
    stream = PrintToLog(logger, original)
    print("one", 2, "three", file=stream)
    print("first\nsecond", file=stream)
    print("partial", end="", file=stream)
    assert [r.getMessage() for r in collect.records] == ["one 2 three", "first", "second"]
    stream.flush()
    assert collect.records[-1].getMessage() == "partial"
    assert {r.levelno for r in collect.records} == {logging.INFO}
    assert original.getvalue() == ""


def test_partial_lines_of_two_threads_do_not_mix() -> None:
    logger, collect = wired("rfetchtest.stdout2")
    stream = PrintToLog(logger, io.StringIO())
    halfway = threading.Barrier(2)

    def write(word: str) -> None:
        stream.write(word + "-start ")
        halfway.wait()
        stream.write(word + "-end\n")

    threads = [threading.Thread(target=write, args=(w,)) for w in ("x", "y")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r.getMessage() for r in collect.records) == ["x-start x-end", "y-start y-end"]
