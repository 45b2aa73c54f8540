"""What PyPI would get: ``python -m build`` then ``twine check`` pass, and the wheel's
metadata has the classifiers, project URLs and license file, no ``dev`` extra, and a README
whose every link is absolute and names a file of this repository. No Redis; the build runs
without isolation (hatchling and the readme hook come with the dev dependency group)."""

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


def test_the_wheel_metadata_has_classifiers_urls_and_the_license(dist: Path) -> None:
    wheel = zipfile.ZipFile(next(dist.glob("*.whl")))
    names = wheel.namelist()
    meta = Parser().parsestr(wheel.read(next(n for n in names if n.endswith("/METADATA")))
                             .decode())
    classifiers = meta.get_all("Classifier") or []
    assert "Typing :: Typed" in classifiers
    for version in ("3.10", "3.11", "3.12", "3.13"):
        assert f"Programming Language :: Python :: {version}" in classifiers
    assert meta["Requires-Python"] == ">=3.10"
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert {"Source", "Documentation"} <= set(urls)
    assert meta["License-Expression"] == "MIT"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "dev" not in (meta.get_all("Provides-Extra") or [])
    assert "fastapi" in (meta.get_all("Provides-Extra") or [])
    assert "rfetch/py.typed" in names


def test_every_readme_link_on_pypi_is_absolute_and_names_a_repository_file(dist: Path) -> None:
    wheel = zipfile.ZipFile(next(dist.glob("*.whl")))
    meta = Parser().parsestr(
        wheel.read(next(n for n in wheel.namelist() if n.endswith("/METADATA"))).decode()
    )
    body = meta.get_payload()
    assert isinstance(body, str)
    source = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])["Source"]
    links = re.findall(r"\]\(([^)\s]+)\)", body)
    assert len(links) >= 50
    for link in links:
        assert link.startswith("https://"), link
        if link.startswith(f"{source}/blob/main/"):
            path = link.removeprefix(f"{source}/blob/main/").split("#")[0]
            assert (ROOT / path).exists(), link
