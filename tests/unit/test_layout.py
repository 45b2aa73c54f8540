"""The code base keeps the promises of its layout: every module is described in
docs/architecture.md, nothing cites this project's tracker or links outside the repository,
and the worker's parts say exactly what they are given at construction."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import rfetch.worker

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "rfetch"
TRACKER_TAG = re.compile(r"\bissues? #\d+", re.IGNORECASE)
OUTSIDE_LINK = re.compile(r"\.\./shared/|\.\./\.\./")


def modules() -> list[str]:
    """Every module of the package, as its path below ``rfetch/`` (``worker/fetch.py``)."""
    return sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path.name not in {"__init__.py", "__main__.py", "version.py"}
    )


def test_architecture_names_every_module() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = [name for name in modules() if name not in text]
    assert missing == [], f"docs/architecture.md does not name {missing}"


def tracked_text_files() -> list[Path]:
    roots = ["rfetch", "docs", "tests", "benchmarks", "contrib", "scripts", "examples"]
    files = [ROOT / "README.md"]
    for root in roots:
        for path in (ROOT / root).rglob("*"):
            if (
                path.is_file()
                and path.suffix in {".py", ".md", ".lua", ".sh", ".rb", ".html", ".js", ".toml"}
                and not any(part.startswith(".venv") for part in path.parts)  # .venv-peers too
                and "results" not in path.parts
            ):
                files.append(path)
    return files


def test_no_tracker_numbers_and_no_links_outside_the_repository() -> None:
    offenders = []
    for path in tracked_text_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if TRACKER_TAG.search(line) or OUTSIDE_LINK.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:80]}")
    assert offenders == [], "\n".join(offenders)


def worker_classes() -> list[type]:
    found: dict[str, type] = {}
    for info in pkgutil.iter_modules(rfetch.worker.__path__, "rfetch.worker."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and value.__module__ == module.__name__
                and "__init__" in vars(value)
            ):
                found[f"{module.__name__}.{name}"] = value
    return [found[name] for name in sorted(found)]


@pytest.mark.parametrize("cls", worker_classes(), ids=lambda c: c.__qualname__)
def test_worker_constructors_take_no_any(cls: type) -> None:
    annotations = inspect.signature(cls.__init__).parameters.values()
    loose = [p.name for p in annotations if re.search(r"\bAny\b", str(p.annotation))]
    assert loose == [], f"{cls.__qualname__}.__init__ takes Any for {loose}"


@pytest.mark.parametrize(
    "cls", [c for c in worker_classes() if not dataclasses.is_dataclass(c)],
    ids=lambda c: c.__qualname__,
)
def test_worker_parts_take_the_context_and_at_most_five_parameters(cls: type) -> None:
    parameters = list(inspect.signature(cls.__init__).parameters)[1:]  # self excluded
    assert len(parameters) <= 5, f"{cls.__qualname__}.__init__ takes {parameters}"
