"""Compiled bytecode for a test run where ``PYTHONDONTWRITEBYTECODE`` is set.

That variable (set on the project's machine) keeps every Python process from caching what it
compiles: each ``rfetch worker`` or CLI subprocess a test starts then compiles rfetch's
modules again (about 0.2 s of CPU each, several hundred starts per run), and each pytest
process rewrites and compiles every test module's asserts again (about 7 s of CPU per
pytest-xdist process). The run keeps the variable's point, no ``__pycache__`` folder in the
source tree, by caching under ``PYTHONPYCACHEPREFIX`` instead (a folder of the system's temp
directory unless the variable names one). Nothing a test checks depends on it: Python reads
a cached file only when it matches its source's size and modification time.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path


def cache_outside_the_tree() -> None:
    """Where ``PYTHONDONTWRITEBYTECODE`` is set: write bytecode under
    ``PYTHONPYCACHEPREFIX`` (default ``<temp dir>/rfetch-pycache-<uid>``), in this process
    (the test modules are compiled after this) and in every process it starts (pytest-xdist
    processes, worker and CLI subprocesses inherit the environment). Elsewhere nothing
    changes."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return
    default = Path(tempfile.gettempdir()) / f"rfetch-pycache-{os.getuid()}"
    prefix = os.environ.setdefault("PYTHONPYCACHEPREFIX", str(default))
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False
