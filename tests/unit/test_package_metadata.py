"""What PyPI would get: ``python -m build`` then ``twine check`` pass, and the wheel's
metadata has the classifiers and license file, no ``dev`` extra, and a README without a
relative link (PyPI would break it): each becomes its text and the file it names, which the
sdist carries. No project URL is declared until the project has a public address. No
Redis; the build runs without isolation (hatchling and the readme hook come with the dev
dependency group)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
README = ROOT / "README.md"

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None
        for m in ("build", "twine", "hatchling", "hatch_fancy_pypi_readme")),
    reason="build, twine, hatchling or hatch-fancy-pypi-readme is not installed",
)


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_twine_check_passes(dist: Path) -> None:
    files = sorted(str(p) for p in dist.iterdir())
    assert len(files) == 2  # the sdist and the wheel
    done = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *files],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_wheel_metadata_has_classifiers_and_the_license(dist: Path) -> None:
    wheel = zipfile.ZipFile(next(dist.glob("*.whl")))
    names = wheel.namelist()
    meta = Parser().parsestr(wheel.read(next(n for n in names if n.endswith("/METADATA")))
                             .decode())
    classifiers = meta.get_all("Classifier") or []
    assert "Typing :: Typed" in classifiers
    for version in ("3.10", "3.11", "3.12", "3.13"):
        assert f"Programming Language :: Python :: {version}" in classifiers
    assert meta["Requires-Python"] == ">=3.10"
    assert meta.get_all("Project-URL") is None  # no address is invented
    assert meta["License-Expression"] == "MIT"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "dev" not in (meta.get_all("Provides-Extra") or [])
    assert "fastapi" in (meta.get_all("Provides-Extra") or [])
    assert "rfetch/py.typed" in names


def test_the_readme_on_pypi_has_no_relative_link_and_names_existing_files(dist: Path) -> None:
    wheel = zipfile.ZipFile(next(dist.glob("*.whl")))
    meta = Parser().parsestr(
        wheel.read(next(n for n in wheel.namelist() if n.endswith("/METADATA"))).decode()
    )
    body = meta.get_payload()
    assert isinstance(body, str)
    links = re.findall(r"\]\(([^)\s]+)\)", body)
    assert all(link.startswith(("https://", "http://", "#", "mailto:")) for link in links), [
        link for link in links if not link.startswith(("https://", "http://", "#", "mailto:"))
    ]
    relative = re.findall(r"\]\((?!https?://|#|mailto:)([^)\s]+)\)", README.read_text())
    assert len(relative) >= 50  # the repository's README does link its docs
    for path in relative:
        assert f"(`{path}`)" in body, path
        assert (ROOT / path.split("#")[0]).exists(), path
