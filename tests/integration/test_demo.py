"""The main-job demo (examples/stdlib_census/run.py) against a real Redis.

The demo runs three real ``rfetch worker`` processes, SIGTERMs one half way and checks its
own results; these tests also check what it stored, independently of its summary.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

import pytest
import redis

from tests.support.redis_server import RedisServer, free_port

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "examples" / "stdlib_census" / "run.py"


def run_demo(redis_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RFETCH_")}
    env["REDIS_URL"] = redis_url
    return subprocess.run(
        [sys.executable, str(RUN), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def load_run_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("stdlib_census_run", RUN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up while it is executed
    spec.loader.exec_module(module)
    return module


def sorted_stdlib_files(limit: int) -> list[str]:
    """The demo's file list, built here another way (rglob instead of os.walk)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    skip = {"site-packages", "dist-packages", "__pycache__"}
    files = [
        p.relative_to(root).as_posix()
        for p in root.rglob("*.py")
        if p.is_file() and not skip.intersection(p.relative_to(root).parts)
    ]
    return sorted(files)[:limit]


def test_demo_processes_every_file_against_the_configured_redis(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    r.set("outside:the:namespace", "kept")
    r.set("census-test:left:by:an:earlier:run", "x")
    result = run_demo(redis_server.url, "--limit", "120", "--namespace", "census-test")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "using Redis at" in result.stdout, output
    assert "embedded" not in result.stdout, output
    assert "OK: all 120 files processed exactly as expected" in result.stdout, output
    assert re.search(r"worker 1 exited with code 0 after", result.stdout), output

    # What the workers stored, checked here with a third way of counting lines.
    root = Path(sysconfig.get_paths()["stdlib"])
    stored = {k.decode(): v.decode() for k, v in r.hgetall("census-test:census:results").items()}
    files = sorted_stdlib_files(120)
    assert sorted(stored) == files
    for rel in files:
        data = (root / rel).read_bytes()
        lines = len(data.split(b"\n")) - (1 if data.endswith(b"\n") or not data else 0)
        assert stored[rel] == f"{lines} {hashlib.sha256(data).hexdigest()}", rel

    # Only its own namespace was touched; the earlier run's key is gone; nothing is left over.
    assert r.get("outside:the:namespace") == b"kept"
    assert not r.exists("census-test:left:by:an:earlier:run")
    assert all(k.startswith(b"census-test:") for k in r.keys("*") if k != b"outside:the:namespace")
    assert r.llen("census-test:queue:census") == 0
    assert list(r.scan_iter("census-test:queue:sq|*")) == []
    assert r.scard("census-test:processes") == 0
    assert r.zcard("census-test:retry") == 0 and r.zcard("census-test:dead") == 0


def test_demo_starts_and_stops_an_embedded_redis_when_redis_url_does_not_answer() -> None:
    nobody = f"redis://127.0.0.1:{free_port()}/0"
    result = run_demo(nobody, "--limit", "30")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "does not answer; starting an embedded Redis" in result.stdout, output
    assert "OK: all 30 files processed exactly as expected" in result.stdout, output
    match = re.search(r"started an embedded redis-server at \S+ \(pid (\d+)", result.stdout)
    assert match, output
    assert f"stopped the embedded redis-server (pid {match.group(1)})" in result.stdout
    with pytest.raises(ProcessLookupError):
        os.kill(int(match.group(1)), 0)


def test_summary_check_reports_missing_mismatched_and_unexpected_files(tmp_path: Path) -> None:
    run = load_run_module()
    expected = {"a.py": "1 aa", "b.py": "2 bb", "c.py": "3 cc"}
    assert run.check_results(expected, dict(expected)).ok
    check = run.check_results(expected, {"a.py": "1 aa", "b.py": "2 XX", "z.py": "0 zz"})
    assert not check.ok
    assert check.missing == ["c.py"]
    assert check.mismatched == [("b.py", "2 bb", "2 XX")]
    assert check.unexpected == ["z.py"]

    # Line counting: "\n"-terminated lines plus a last one without "\n"; "\r" is no break.
    cases = {b"": 0, b"a": 1, b"a\n": 1, b"a\nb": 2, b"a\r\nb\r\n": 2, b"a\rb\n\n": 2}
    for data, lines in cases.items():
        path = tmp_path / "f.py"
        path.write_bytes(data)
        assert run.census_value(path) == f"{lines} {hashlib.sha256(data).hexdigest()}", data
