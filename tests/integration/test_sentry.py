"""The Sentry integration, with sentry-sdk's own client and a recording transport (no network).

Jobs are driven through the worker's real parts against the session redis-server: fetched
with ``ReliableFetch``, run by ``Processor.process``; internal errors go through a real
``Launcher``'s manager threads, so its logging and its error reporting are both exercised.
sentry-sdk's default integrations (logging, dedupe) stay on, as in an application.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import sentry_sdk
from click.testing import CliRunner

import rfetch
from rfetch.cli import main
from rfetch.config import Config
from rfetch.errors import ConfigError
from rfetch.integrations.sentry import SentryErrorHandler, install
from rfetch.worker.registry import Registry
from tests.support.gate_worker import Launch, LaunchedWorker, Worker, broken_once, running
from tests.support.redis_server import RedisServer
from tests.support.sentry import DSN, RecordingTransport, start_sentry
from tests.support.wait import wait_for

ROOT = Path(__file__).resolve().parents[2]


class Fails(rfetch.Job):
    retry = 3

    def perform(self, *args: Any) -> None:
        raise ValueError(f"failed with {list(args)}")


class Ok(rfetch.Job):
    ran: list[str] = []

    def perform(self, *args: Any) -> None:
        Ok.ran.append(self.jid)


@pytest.fixture
def cfg(redis_server: RedisServer, r: redis.Redis) -> Config:
    return Config(redis_url=redis_server.url, block_timeout=0.2)


@pytest.fixture
def parts(cfg: Config) -> Iterator[Worker]:
    Ok.ran.clear()
    with running(cfg, [Fails, Ok]) as p:
        yield p


def exception_of(event: dict[str, Any]) -> tuple[str, str]:
    last = event["exception"]["values"][-1]
    return last["type"], last["value"]


# -- job failures -----------------------------------------------------------------------------


def test_a_job_failure_is_one_event_with_the_job_as_tags_and_context(
    cfg: Config, parts: Worker, transport: RecordingTransport, r: redis.Redis
) -> None:
    start_sentry(cfg, transport)
    args = [7, "x", {"k": [1, None]}]
    jid = parts.client.push(Fails.job_name(), args)

    parts.work_one()

    [event] = transport.events()
    assert exception_of(event) == ("ValueError", f"failed with {args}")
    assert event["tags"] == {
        "jid": jid,
        "queue": "default",
        "job_class": Fails.job_name(),
        "retry_count": "0",
    }
    assert event["contexts"]["rfetch"] == {
        "jid": jid,
        "class": Fails.job_name(),
        "queue": "default",
        "retry_count": 0,
        "args": args,
    }
    assert event["transaction"] == f"rfetch/{Fails.job_name()}"
    # Reporting did not change the outcome: the job waits in the retry set.
    assert r.zcard("retry") == 1


def test_a_retried_job_that_fails_twice_is_two_events(
    cfg: Config, parts: Worker, transport: RecordingTransport, r: redis.Redis
) -> None:
    start_sentry(cfg, transport)
    jid = parts.client.push(Fails.job_name(), ["again"])

    parts.work_one()
    r.zadd("retry", {member: 1.0 for member in r.zrange("retry", 0, -1)}, xx=True)
    assert parts.poller.enqueue_due() == 1
    parts.work_one()

    events = transport.events()
    assert len(events) == 2
    assert [e["tags"]["jid"] for e in events] == [jid, jid]
    # Sidekiq's count after each failure: 0 for the first run, 1 for the first retry.
    assert [e["tags"]["retry_count"] for e in events] == ["0", "1"]
    assert [e["contexts"]["rfetch"]["retry_count"] for e in events] == [0, 1]
    assert events[0]["event_id"] != events[1]["event_id"]
    assert r.zcard("retry") == 1


def test_tags_of_one_job_do_not_leak_into_the_next_event(
    cfg: Config, parts: Worker, transport: RecordingTransport
) -> None:
    start_sentry(cfg, transport)
    parts.client.push(Fails.job_name(), [1])
    parts.work_one()

    logging.getLogger("myapp").error("the application's own error")

    [job_event, app_event] = transport.events()
    assert job_event["tags"]["job_class"] == Fails.job_name()
    # The application's own error logs still reach Sentry (only rfetch's duplicating
    # loggers are ignored), and carry none of the job's tags or context.
    assert app_event["logentry"]["message"] == "the application's own error"
    assert "jid" not in app_event.get("tags", {})
    assert "rfetch" not in app_event.get("contexts", {})


def test_args_can_be_left_out(cfg: Config, parts: Worker, transport: RecordingTransport) -> None:
    start_sentry(cfg, transport)
    cfg.error_handlers[:] = [SentryErrorHandler(include_args=False)]
    parts.client.push(Fails.job_name(), ["secret@example.com"])

    parts.work_one()

    [event] = transport.events()
    assert "args" not in event["contexts"]["rfetch"]
    assert "secret@example.com" not in repr(event["contexts"]) + repr(event["tags"])


def test_an_invalid_job_is_one_event_with_its_context(
    cfg: Config, parts: Worker, transport: RecordingTransport, r: redis.Redis
) -> None:
    start_sentry(cfg, transport)
    r.lpush("queue:default", b"{not json")

    parts.work_one()

    # One event: rfetch.worker.retry's "invalid job" log line is not turned into a second one.
    [event] = transport.events()
    assert exception_of(event)[0] == "InvalidJob"
    assert event["tags"] == {"queue": "default", "rfetch.context": "invalid job"}
    assert event["contexts"]["rfetch"] == {"queue": "default", "context": "invalid job"}
    assert r.zrange("dead", 0, -1) == [b"{not json"]


# -- internal errors --------------------------------------------------------------------------


@pytest.fixture
def launched(cfg: Config, launch: Launch) -> LaunchedWorker:
    Ok.ran.clear()
    return launch(cfg, [Fails, Ok])


RunPastABug = Callable[[object, str, str], dict[str, Any]]


@pytest.fixture
def run_past_a_bug(
    cfg: Config,
    launched: LaunchedWorker,
    transport: RecordingTransport,
    monkeypatch: pytest.MonkeyPatch,
) -> RunPastABug:
    """``run(part, method, message)``: with Sentry started, make ``part.method`` raise
    ``RuntimeError(message)`` once, push a job, start the manager, wait for the job to run
    all the same, and return the one event sent."""

    def run(part: object, method: str, message: str) -> dict[str, Any]:
        start_sentry(cfg, transport)
        error = RuntimeError(message)
        monkeypatch.setattr(part, method, broken_once(getattr(part, method), error))
        jid = launched.client.push(Ok.job_name(), [])
        launched.start()
        wait_for(lambda: jid in Ok.ran, 10, f"the job to run after the error in {method}")
        [event] = transport.events()
        return event

    return run


def test_an_internal_fetch_error_is_reported_with_its_context(
    launched: LaunchedWorker, run_past_a_bug: RunPastABug
) -> None:
    # Exactly one event, and it is the handler's (the manager's log.exception of the same
    # error would otherwise be kept by sentry-sdk's dedupe, without the context).
    event = run_past_a_bug(launched.launcher.fetch, "retrieve_work", "a bug in fetch")
    assert exception_of(event) == ("RuntimeError", "a bug in fetch")
    assert event["tags"] == {"rfetch.context": "fetch"}
    assert event["contexts"]["rfetch"] == {"context": "fetch"}
    assert event["transaction"] == "rfetch/fetch"


def test_an_internal_processor_error_is_reported_with_its_context(
    launched: LaunchedWorker, run_past_a_bug: RunPastABug
) -> None:
    # The job is pushed back (counted, as a poison pill would be) and runs on the next try.
    event = run_past_a_bug(launched.launcher.processor, "process", "a bug in the processor")
    assert exception_of(event) == ("RuntimeError", "a bug in the processor")
    assert event["tags"] == {"rfetch.context": "processor"}


# -- install ----------------------------------------------------------------------------------


def test_install_without_a_dsn_does_nothing(cfg: Config, transport: RecordingTransport) -> None:
    assert install(cfg) is False
    assert cfg.error_handlers == []
    assert not sentry_sdk.is_initialized()


def test_install_reads_sentry_dsn_when_called_and_adds_the_handler_once(
    cfg: Config, transport: RecordingTransport, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SENTRY_DSN", DSN)

    assert install(cfg, transport=transport, auto_enabling_integrations=False) is True
    assert install(cfg) is True

    assert sentry_sdk.get_client().dsn == DSN
    assert [type(h) for h in cfg.error_handlers] == [SentryErrorHandler]


def test_install_keeps_a_client_the_application_initialised(
    cfg: Config, transport: RecordingTransport
) -> None:
    sentry_sdk.init(dsn=DSN, transport=transport, auto_enabling_integrations=False)

    assert install(cfg, dsn="http://other@localhost/2") is True

    assert sentry_sdk.get_client().dsn == DSN
    assert len(cfg.error_handlers) == 1


def test_install_rejects_a_malformed_dsn(cfg: Config, transport: RecordingTransport) -> None:
    with pytest.raises(ConfigError, match="DSN is not valid"):
        install(cfg, dsn="not a dsn")
    assert cfg.error_handlers == []


def test_install_with_a_dsn_but_no_sentry_sdk_names_the_extra(
    cfg: Config, transport: RecordingTransport, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "sentry_sdk", None)  # makes ``import sentry_sdk`` fail

    assert install(cfg) is False
    with pytest.raises(ConfigError, match=r"pip install 'rfetch\[sentry\]'"):
        install(cfg, dsn=DSN)
    assert cfg.error_handlers == []


def run_python(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "SENTRY_DSN"}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@pytest.mark.parametrize("blocked", [True, False], ids=["sentry-sdk absent", "present"])
def test_the_module_and_the_cli_import_without_loading_sentry_sdk(blocked: bool) -> None:
    code = (
        f"import sys\nif {blocked}: sys.modules['sentry_sdk'] = None\n"
        "import rfetch.cli, rfetch.integrations.sentry as s\n"
        "from rfetch.config import Config\n"
        "print(s.install(Config()), sys.modules.get('sentry_sdk'))\n"
    )
    # No DSN: install is inactive and never imports sentry-sdk.
    assert run_python(code) == "False None"


# -- the CLI ----------------------------------------------------------------------------------


@pytest.fixture
def rfetch_logger() -> Iterator[None]:
    """The CLI configures the "rfetch" and the root logger; put them back for the other
    tests."""
    loggers = [logging.getLogger("rfetch"), logging.getLogger()]
    saved = [(logger.handlers[:], logger.level, logger.propagate) for logger in loggers]
    yield
    for logger, (handlers, level, propagate) in zip(loggers, saved, strict=True):
        logger.handlers[:], logger.level, logger.propagate = handlers, level, propagate


class FakeLauncher:
    """Stands in for Launcher: reports one error through the handlers the CLI configured."""

    configs: list[Config] = []

    def __init__(
        self, config: Config, registry: Registry, identity: str | None = None,
        supervision: object = None, **parts: object,
    ) -> None:
        self.config = config

    def run(self) -> int:
        FakeLauncher.configs.append(self.config)
        for handler in self.config.error_handlers:
            handler(RuntimeError("from the worker"), {"context": "cli test"})
        return 0


def test_the_worker_command_installs_sentry_from_sentry_dsn(
    redis_server: RedisServer,
    transport: RecordingTransport,
    monkeypatch: pytest.MonkeyPatch,
    rfetch_logger: None,
) -> None:
    # An application module (-r) that initialised sentry-sdk itself: its client is kept,
    # which also keeps this test off the network.
    sentry_sdk.init(dsn=DSN, transport=transport, auto_enabling_integrations=False)
    monkeypatch.setattr("rfetch.cli.worker_launch.Launcher", FakeLauncher)
    monkeypatch.setattr(Registry, "from_loaded", classmethod(lambda cls: cls([Ok])))
    FakeLauncher.configs.clear()

    result = CliRunner().invoke(
        # --cpu-affinity none: the worker command runs in this process, not to be pinned
        main, ["worker", "--redis-url", redis_server.url, "--cpu-affinity", "none"],
        env={"SENTRY_DSN": DSN},
    )

    assert result.exit_code == 0, result.output
    [config] = FakeLauncher.configs
    assert [type(h) for h in config.error_handlers] == [SentryErrorHandler]
    [event] = transport.events()
    assert event["tags"] == {"rfetch.context": "cli test"}


def test_the_worker_command_without_sentry_sdk_fails_with_the_install_hint(
    redis_server: RedisServer,
    transport: RecordingTransport,
    monkeypatch: pytest.MonkeyPatch,
    rfetch_logger: None,
) -> None:
    monkeypatch.setitem(sys.modules, "sentry_sdk", None)
    monkeypatch.setattr("rfetch.cli.worker_launch.Launcher", FakeLauncher)
    monkeypatch.setattr(Registry, "from_loaded", classmethod(lambda cls: cls([Ok])))
    FakeLauncher.configs.clear()

    result = CliRunner().invoke(
        main, ["worker", "--redis-url", redis_server.url, "--sentry-dsn", DSN,
               "--cpu-affinity", "none"]
    )

    assert result.exit_code == 1
    assert "pip install 'rfetch[sentry]'" in result.output
    assert FakeLauncher.configs == []


def test_the_handler_does_not_raise_when_sentry_is_not_initialised(
    transport: RecordingTransport,
) -> None:
    assert not sentry_sdk.is_initialized()
    SentryErrorHandler()(RuntimeError("nowhere"), {"context": "fetch"})
