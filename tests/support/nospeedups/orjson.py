"""First on PYTHONPATH, hides orjson: rfetch falls back to the standard json module (the
tests of rfetch without its default speed-ups; scripts/test-versions)."""

raise ImportError("orjson hidden by tests/support/nospeedups")
