"""``rfetch worker -r``: which targets are warned about as adding no job class, and the
message of a target that raises on import (named, with the line that raised)."""

from __future__ import annotations

import gc
import importlib
import logging
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from rfetch.cli import main
from rfetch.errors import RequireFailed
from rfetch.worker.registry import require, require_all

JOBS = textwrap.dedent(
    """
    import rfetch

    class Report(rfetch.Job):
        def perform(self, n):
            pass
    """
)


@pytest.fixture
def sandbox(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    """A package ``<prefix>`` in the current folder; its modules are forgotten afterwards."""
    prefix = f"rfetch_warn_{uuid.uuid4().hex[:10]}"
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    (tmp_path / prefix).mkdir()
    (tmp_path / prefix / "__init__.py").write_text("")
    yield prefix
    for name in [m for m in sys.modules if m.startswith(prefix)]:
        del sys.modules[name]
    importlib.invalidate_caches()
    gc.collect()


def write(tmp_path: Path, module: str, source: str) -> None:
    (tmp_path / Path(*module.split("."))).with_suffix(".py").write_text(source)
    importlib.invalidate_caches()


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_a_module_an_earlier_require_imported_is_not_warned_about(
    tmp_path: Path, sandbox: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The Django worker command: the first -r (django.setup(), an AppConfig.ready) imports
    # the jobs module, and the second -r names it; neither is warned about.
    write(tmp_path, f"{sandbox}.jobs", JOBS)
    write(tmp_path, f"{sandbox}.setup", f"import {sandbox}.jobs\n"
          "def configure_worker(config):\n    pass\n")
    with caplog.at_level(logging.WARNING, "rfetch.registry"):
        require_all([f"{sandbox}.setup", f"{sandbox}.jobs"])
    assert warnings(caplog) == []


def test_a_setup_module_without_jobs_is_not_warned_about(
    tmp_path: Path, sandbox: str, caplog: pytest.LogCaptureFixture
) -> None:
    write(tmp_path, f"{sandbox}.jobs", JOBS)
    write(tmp_path, f"{sandbox}.setup", "def configure_worker(config):\n    pass\n")
    with caplog.at_level(logging.WARNING, "rfetch.registry"):
        require_all([f"{sandbox}.setup", f"{sandbox}.jobs"])
    assert warnings(caplog) == []


def test_classes_imported_into_a_module_count_for_it(
    tmp_path: Path, sandbox: str, caplog: pytest.LogCaptureFixture
) -> None:
    write(tmp_path, f"{sandbox}.jobs", JOBS)
    write(tmp_path, f"{sandbox}.tasks", f"from {sandbox}.jobs import Report\n")
    with caplog.at_level(logging.WARNING, "rfetch.registry"):
        require_all([f"{sandbox}.jobs", f"{sandbox}.tasks"])
    assert warnings(caplog) == []


def test_a_module_that_accounts_for_no_job_is_warned_about(
    tmp_path: Path, sandbox: str, caplog: pytest.LogCaptureFixture
) -> None:
    write(tmp_path, f"{sandbox}.jobs", JOBS)
    write(tmp_path, f"{sandbox}.helpers", "VALUE = 1\n")
    with caplog.at_level(logging.WARNING, "rfetch.registry"):
        require_all([f"{sandbox}.jobs", f"{sandbox}.helpers"])
    (line,) = warnings(caplog)
    assert line.startswith(f"-r {sandbox}.helpers adds no job class")
    assert "e.g. -r" not in line


def test_a_require_that_raises_names_the_target_and_the_line(
    tmp_path: Path, sandbox: str
) -> None:
    write(tmp_path, f"{sandbox}.broken", "import os\n\nSETTING = os.environ['RFETCH_NOPE_X']\n")
    with pytest.raises(RequireFailed) as raised:
        require(f"{sandbox}.broken")
    message = str(raised.value)
    assert message.startswith(f"-r {sandbox}.broken: importing it raised KeyError: ")
    assert "RFETCH_NOPE_X" in message
    assert f"{Path(sandbox, 'broken.py')}:3 in <module>" in message
    assert isinstance(raised.value.__cause__, KeyError)


def test_the_worker_command_exits_1_with_that_message(tmp_path: Path, sandbox: str) -> None:
    write(tmp_path, f"{sandbox}.broken", "raise RuntimeError('no database configured')\n")
    result = CliRunner().invoke(main, ["worker", "-r", f"{sandbox}.broken"])
    assert result.exit_code == 1, result.output
    assert f"Error: -r {sandbox}.broken: importing it raised RuntimeError: no database " \
        "configured at " in result.output
    assert "Traceback" not in result.output
    verbose = CliRunner().invoke(main, ["worker", "-v", "-r", f"{sandbox}.broken"])
    assert verbose.exit_code == 1
    assert "Traceback" in verbose.output and "RuntimeError: no database" in verbose.output
