"""``rfetch enqueue NAME``: a NAME that is not an importable job class is an error at the
prompt (exit 1, close names suggested), before any connection to Redis; ``--external``
pushes a name only another process runs."""

from __future__ import annotations

import importlib
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from rfetch.cli import main
from rfetch.cli.job_lookup import find_job


@pytest.fixture
def app(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    """A package ``<name>`` in the current folder with ``jobs.py`` (SendWelcome, a
    ``@rfetch.job`` function and a helper); forgotten afterwards."""
    name = f"rfetch_enq_{uuid.uuid4().hex[:10]}"
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text("")
    (tmp_path / name / "jobs.py").write_text(textwrap.dedent(
        """
        import rfetch

        class SendWelcome(rfetch.Job):
            queue = "mail"

            def perform(self, user_id):
                pass

        @rfetch.job(queue="reports")
        def build_report(day):
            pass

        def helper():
            pass
        """
    ))
    importlib.invalidate_caches()
    yield name
    for module in [m for m in sys.modules if m.startswith(name)]:
        del sys.modules[module]


def enqueue(*args: str) -> Result:
    # Nothing listens on port 1: a test that got as far as Redis fails with another message.
    return CliRunner().invoke(main, ["enqueue", *args, "--redis-url", "redis://127.0.0.1:1/0"])


def test_a_misspelt_class_is_refused_with_a_suggestion(app: str) -> None:
    result = enqueue(f"{app}.jobs.SendWelcom", "[1]")
    assert result.exit_code == 1
    assert f"Error: {app}.jobs has no job SendWelcom; did you mean {app}.jobs.SendWelcome?" \
        in result.output


def test_a_missing_module_is_refused_and_points_to_external(app: str) -> None:
    result = enqueue(f"{app}.jbos.SendWelcome", "[1]")
    assert result.exit_code == 1
    assert f"Error: {app} has no job jbos.SendWelcome; for a job only another process" \
        in result.output and "--external" in result.output
    ruby = enqueue("HardWorker", "[1]")  # a Ruby class name: refused without --external
    assert ruby.exit_code == 1
    assert "'HardWorker' names no importable module.QualName" in ruby.output
    assert "--external" in ruby.output


def test_an_attribute_that_is_not_a_job_is_refused(app: str) -> None:
    result = enqueue(f"{app}.jobs.helper", "[]")
    assert result.exit_code == 1 and "is not a job class" in result.output


def test_a_job_class_and_a_job_function_are_found(app: str) -> None:
    assert find_job(f"{app}.jobs.SendWelcome").queue == "mail"
    assert find_job(f"{app}.jobs.build_report").default_options()["queue"] == "reports"


def test_a_module_that_raises_on_import_is_a_one_line_error(app: str, tmp_path: Path) -> None:
    (tmp_path / app / "models.py").write_text('raise RuntimeError("Apps are not loaded yet.")\n')
    importlib.invalidate_caches()
    result = enqueue(f"{app}.models.Signup", "[]")
    assert result.exit_code == 1
    assert f"Error: importing {app}.models to check the job name raised RuntimeError: " \
        "Apps are not loaded yet.; fix it, or push the name unchecked with --external" \
        in result.output
    assert "Traceback" not in result.output
