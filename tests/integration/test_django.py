"""Runs the Django integration's tests (tests/django_app/tests.py) with Django's own test
runner, against the PostgreSQL of this machine (127.0.0.1:5432, trust auth) and the Redis
of this pytest session. Skipped, with the reason, where Django, psycopg or PostgreSQL is
missing."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.redis_server import RedisServer

pytest.importorskip("django", reason="Django is not installed (pip install 'rfetch[django]')")
pytest.importorskip("psycopg", reason="psycopg is not installed (pip install 'psycopg[binary]')")

ROOT = Path(__file__).resolve().parents[2]


def postgres_answers() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=1):
            return True
    except OSError:
        return False


def run_django_tests(redis_server: RedisServer, *labels: str) -> str:
    """Run Django's test runner on ``labels``; its output (asserted successful)."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.django_app.settings",
        "REDIS_URL": redis_server.url,
        # Django creates and drops test_<name>: one name per run, so runs never collide.
        "RFETCH_DJANGO_DB": f"rfetch_django_{os.getpid()}",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "django", "test", *labels, "--noinput", "-v", "2"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=280,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-6000:]
    return output


@pytest.mark.skipif(not postgres_answers(), reason="no PostgreSQL at 127.0.0.1:5432")
def test_django_integration_with_djangos_runner(redis_server: RedisServer) -> None:
    output = run_django_tests(redis_server, "tests.django_app")
    ran = re.search(r"Ran (\d+) tests", output)
    assert ran is not None and int(ran.group(1)) == 34, output[-3000:]


@pytest.mark.slow
@pytest.mark.skipif(not postgres_answers(), reason="no PostgreSQL at 127.0.0.1:5432")
def test_a_killed_workers_task_runs_again(redis_server: RedisServer) -> None:
    """tests/django_app/chaos_tasks.py: a django.tasks task whose worker is SIGKILLed
    mid-task runs again on another worker and ends SUCCESSFUL (reliable fetch)."""
    pytest.importorskip("rfetch.integrations.django.tasks.compat",
                        reason="Django's task framework is not installed")
    output = run_django_tests(redis_server, "tests.django_app.chaos_tasks")
    assert re.search(r"Ran 1 test\b", output), output[-3000:]
