"""The installed package's types reach a user's type checker: mypy --strict and pyright,
run on tests/typing/user_code.py from a directory outside the repository (so rfetch is found
only through the install, as in a user's project), flag exactly its lines marked ``# wrong``:
unknown options, options of the wrong type, wrong push and bulk arguments. No Redis."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parent.parent / "typing" / "user_code.py"


def wrong_lines() -> set[int]:
    lines = SAMPLE.read_text().splitlines()
    return {n for n, text in enumerate(lines, 1) if "  # wrong:" in text}


def run(args: list[str], cwd: Path) -> str:
    done = subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, timeout=600, check=False
    )
    return done.stdout + done.stderr


@pytest.fixture
def user_project(tmp_path: Path) -> Path:
    """A directory outside the repository holding only the user's module."""
    shutil.copy(SAMPLE, tmp_path / "user_code.py")
    return tmp_path


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed")
def test_mypy_strict_flags_each_wrong_line_through_the_install(user_project: Path) -> None:
    out = run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
         "--cache-dir", str(user_project / ".cache"), "user_code.py"],
        user_project,
    )
    assert "Cannot find implementation" not in out, out
    flagged = {int(m) for m in re.findall(r"^user_code\.py:(\d+): error", out, re.M)}
    assert flagged == wrong_lines(), out


@pytest.mark.skipif(importlib.util.find_spec("pyright") is None, reason="pyright is not installed")
def test_pyright_flags_each_wrong_line_through_the_install(user_project: Path) -> None:
    out = run(
        [sys.executable, "-m", "pyright", "--pythonpath", sys.executable, "user_code.py"],
        user_project,
    )
    assert "could not be resolved" not in out, out
    flagged = {int(m) for m in re.findall(r"user_code\.py:(\d+):\d+ - error", out)}
    assert flagged == wrong_lines(), out


def test_the_typed_options_are_the_options_check_options_takes() -> None:
    from rfetch.jobs.options import JOB_OPTIONS, JobOptions, SetOptions

    assert set(JobOptions.__annotations__) == JOB_OPTIONS
    assert set(SetOptions.__annotations__) == JOB_OPTIONS | {"client"}
