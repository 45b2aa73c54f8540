"""The model-based test of the whole: random sequences of pushes (random option
combinations and scripted behaviours) and events (cancel, TERM, KILL, time) against real
Redis and real workers, checked against the plain-Python model of ``tests/model/model.py``.

CI runs a bounded, derandomized setting (``RFETCH_MODEL_EXAMPLES``, default 15 examples of
at most 10 steps, ``RFETCH_MODEL_STEPS``); a longer run by hand::

    RFETCH_MODEL_EXAMPLES=100 RFETCH_MODEL_STEPS=20 RFETCH_MODEL_SEED=random \\
        RFETCH_MODEL_SHRINK=1 RFETCH_MODEL_TIMEOUT=0 \\
        .venv/bin/python -m pytest -p no:cacheprovider tests/model/test_model.py -q -s
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.model.harness import System
from tests.model.machine import RfetchMachine

PHASES = [Phase.explicit, Phase.generate, Phase.shrink]
"""Shrinking re-runs real workers many times: by hand only (``RFETCH_MODEL_SHRINK=1``)."""


def model_settings() -> settings:
    """CI's bounded setting, or the one the environment asks for."""
    return settings(
        max_examples=int(os.environ.get("RFETCH_MODEL_EXAMPLES", "15")),
        stateful_step_count=int(os.environ.get("RFETCH_MODEL_STEPS", "10")),
        deadline=None,
        derandomize=os.environ.get("RFETCH_MODEL_SEED", "") != "random",
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=PHASES if os.environ.get("RFETCH_MODEL_SHRINK") else PHASES[:-1],
    )


@pytest.mark.slow  # it SIGKILLs workers
# CI's setting takes 1-2 minutes; a longer run by hand: RFETCH_MODEL_TIMEOUT=0 (no bound)
@pytest.mark.timeout(int(os.environ.get("RFETCH_MODEL_TIMEOUT", "600")))
def test_the_model_holds(system: System, tally: Counter[str]) -> None:
    run_state_machine_as_test(lambda: RfetchMachine(system, tally), settings=model_settings())
