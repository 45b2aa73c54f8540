"""The job registry and ``require``: job names, abstract classes, duplicate names, and loading
job modules by module path or file path (``rfetch worker -r``)."""

from __future__ import annotations

import gc
import importlib
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import rfetch
from rfetch.errors import ConfigError, DuplicateJobName, RequireFailed
from rfetch.worker.registry import Registry, require


@rfetch.job(queue="mail", retry=3)
def send_mail(address: str, count: int) -> str:
    return f"sent {count} to {address}"


@pytest.fixture
def collect_local_jobs() -> Iterator[None]:
    """Job classes defined inside a test live on in ``Job.__subclasses__()`` until the cyclic
    GC runs; collect them so a later ``Registry.from_loaded()`` never sees their names."""
    yield
    gc.collect()


@pytest.mark.usefixtures("collect_local_jobs")
def test_registry_from_explicit_classes() -> None:
    class Abstract(rfetch.Job):
        queue = "base"

    class Concrete(Abstract):
        def perform(self) -> None:
            pass

    class Ruby(rfetch.Job):
        name = "HardJob"

        def perform(self) -> None:
            pass

    registry = Registry([Abstract, Concrete, Ruby, Concrete, send_mail.job_class])
    assert registry.get(Concrete.job_name()) is Concrete
    assert Concrete.job_name() == f"{__name__}.{Concrete.__qualname__}"
    assert registry.get("HardJob") is Ruby
    assert registry.get(Ruby.job_name()) is Ruby
    assert registry.get(f"{__name__}.send_mail") is send_mail.job_class
    assert registry.get(Abstract.job_name()) is None  # abstract: no perform of its own
    assert registry.get("Missing") is None
    assert registry.names() == sorted(registry.names())
    assert len(registry) == 3


@pytest.mark.usefixtures("collect_local_jobs")
def test_registry_rejects_duplicate_names() -> None:
    class One(rfetch.Job):
        name = "HardJob"

        def perform(self) -> None:
            pass

    class Two(rfetch.Job):
        name = "HardJob"

        def perform(self) -> None:
            pass

    with pytest.raises(DuplicateJobName, match="HardJob"):
        Registry([One, Two])


@pytest.fixture
def import_sandbox(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    """A unique module-name prefix; sys.path, cwd and new modules are restored afterwards."""
    prefix = f"rfetch_req_{uuid.uuid4().hex[:10]}"
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    yield prefix
    for name in [m for m in sys.modules if m.startswith(prefix)]:
        del sys.modules[name]
    importlib.invalidate_caches()


JOBS_SOURCE = textwrap.dedent(
    """
    import rfetch

    class Report(rfetch.Job):
        def perform(self, n):
            pass
    """
)


def test_require_module_path(tmp_path: Path, import_sandbox: str) -> None:
    package = tmp_path / import_sandbox
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "jobs.py").write_text(JOBS_SOURCE)
    importlib.invalidate_caches()
    (module,) = require(f"{import_sandbox}.jobs")  # found from the current folder
    assert module is sys.modules[f"{import_sandbox}.jobs"]
    assert module.Report.job_name() == f"{import_sandbox}.jobs.Report"
    assert Registry([module.Report]).get(f"{import_sandbox}.jobs.Report") is module.Report


def test_require_file_path(tmp_path: Path, import_sandbox: str) -> None:
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    path = folder / f"{import_sandbox}.py"
    path.write_text(JOBS_SOURCE)
    importlib.invalidate_caches()
    require(str(path))
    module = sys.modules[import_sandbox]
    # Registered as <file stem>.<Class>: the name a client importing that module pushes.
    assert module.Report.job_name() == f"{import_sandbox}.Report"
    assert str(folder) in sys.path


def test_require_missing_module_or_file(tmp_path: Path, import_sandbox: str) -> None:
    with pytest.raises(ConfigError, match="no module"):
        require(f"{import_sandbox}_absent")
    with pytest.raises(ConfigError, match="no such file"):
        require(str(tmp_path / f"{import_sandbox}_absent.py"))
    with pytest.raises(ConfigError, match="no module"):
        require("json.no_such_submodule")  # a typo after an existing package


def test_require_does_not_mask_a_missing_dependency(tmp_path: Path, import_sandbox: str) -> None:
    (tmp_path / f"{import_sandbox}.py").write_text("import rfetch_not_installed_dependency\n")
    importlib.invalidate_caches()
    with pytest.raises(RequireFailed, match="rfetch_not_installed_dependency") as raised:
        require(import_sandbox)
    assert isinstance(raised.value.__cause__, ModuleNotFoundError)


def make_package(root: Path, name: str) -> Path:
    """``<root>/<name>/`` with an empty ``__init__.py``, ``jobs.py`` (Report) and
    ``more/billing.py`` (Invoice) in a subpackage, and a ``__main__.py`` that must not run."""
    package = root / name
    (package / "more").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "jobs.py").write_text(JOBS_SOURCE)
    (package / "more" / "__init__.py").write_text("")
    (package / "more" / "billing.py").write_text(JOBS_SOURCE.replace("Report", "Invoice"))
    (package / "__main__.py").write_text("raise SystemExit('a package __main__ must not run')\n")
    importlib.invalidate_caches()
    return package


@pytest.mark.usefixtures("collect_local_jobs")
def test_require_package_folder_loads_every_module(tmp_path: Path, import_sandbox: str) -> None:
    """README: -r takes a package folder defining the jobs; every module of it is imported,
    so its job classes are registered under the names its client pushes."""
    package = make_package(tmp_path / "src", import_sandbox)
    modules = require(str(package))
    names = Registry.from_loaded().names()
    assert f"{import_sandbox}.jobs.Report" in names
    assert f"{import_sandbox}.more.billing.Invoice" in names
    assert [m.__name__ for m in modules] == [
        import_sandbox, f"{import_sandbox}.jobs", f"{import_sandbox}.more",
        f"{import_sandbox}.more.billing",
    ]
    assert f"{import_sandbox}.__main__" not in sys.modules


def test_require_package_folder_names_the_module_that_fails(
    tmp_path: Path, import_sandbox: str
) -> None:
    package = make_package(tmp_path, import_sandbox)
    (package / "broken.py").write_text("import rfetch_not_installed_dependency\n")
    importlib.invalidate_caches()
    with pytest.raises(ConfigError, match=rf"{import_sandbox}\.broken.*rfetch_not_installed"):
        require(str(package))


@pytest.mark.usefixtures("collect_local_jobs")
def test_require_file_inside_a_package_takes_its_package_name(
    tmp_path: Path, import_sandbox: str
) -> None:
    """``-r src/shop/jobs.py`` registers ``shop.jobs.Report``, the name an application that
    imports ``shop.jobs`` pushes (not ``jobs.Report``)."""
    package = make_package(tmp_path / "src", import_sandbox)
    modules = require(str(package / "more" / "billing.py"))
    assert [m.__name__ for m in modules] == [f"{import_sandbox}.more.billing"]
    assert modules[0].Invoice.job_name() == f"{import_sandbox}.more.billing.Invoice"
    assert str(tmp_path / "src") in sys.path
    assert "billing" not in sys.modules
