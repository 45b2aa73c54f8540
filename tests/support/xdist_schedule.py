"""How ``pytest -n N`` (pytest-xdist) shares the tests among its processes: one test at a
time to whichever process is free, except the tests that share processes set up once for
their module or session (a Redis Cluster, a Sentinel set, the browser and its
``rfetch web``), which one process runs together so that each set starts once.

xdist's own ``--dist loadgroup`` would do this with markers, but it renames the test ids to
carry the group, which pytest 9 ignores (node ids are no longer assignable); grouping by
path here works on every version.
"""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

SHARED_SETUP = (
    "tests/integration/test_cluster.py::",
    "tests/integration/test_sentinel.py::",
    "tests/e2e/",
)
"""Test-id prefixes whose tests one process runs together."""


class SharedSetupScheduling(LoadScopeScheduling):
    """Each test is a unit of work of its own, but for the :data:`SHARED_SETUP` groups."""

    def _split_scope(self, nodeid: str) -> str:
        for prefix in SHARED_SETUP:
            if nodeid.startswith(prefix):
                return prefix
        return nodeid
