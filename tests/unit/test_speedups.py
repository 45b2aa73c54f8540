"""hiredis and orjson: default dependencies of ``pip install rfetch``, and a pure-Python
fallback that works without them (tests/support/nospeedups hides them from a subprocess;
scripts/test-versions runs tests/unit and the worker smoke test that way too)."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import requires

from tests.support.workers import NO_SPEEDUPS

FALLBACK = """
import json, redis.utils, rfetch, rfetch.cli
from rfetch.jobs import payload
assert not redis.utils.HIREDIS_AVAILABLE, "hiredis still visible"
assert payload._fast_dumps is None, "orjson still visible"
job = {"class": "A", "args": [1, "é", 2**70, {"k": [None, True, 1.5]}], "jid": "j"}
text = payload.dumps(job, 10_000)
assert text == json.dumps(job, separators=(",", ":"), ensure_ascii=False), text
assert payload.loads(text.encode()) == job
print("fallback ok")
"""


def test_the_default_install_brings_hiredis_and_orjson() -> None:
    declared = requires("rfetch") or []
    unconditional = {d.split(">=")[0] for d in declared if ";" not in d}
    assert {"hiredis", "orjson"} <= unconditional


def test_rfetch_runs_without_hiredis_and_orjson() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(NO_SPEEDUPS), os.getcwd()])}
    done = subprocess.run(
        [sys.executable, "-c", FALLBACK], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "fallback ok"
