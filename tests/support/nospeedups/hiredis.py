"""First on PYTHONPATH, hides hiredis: redis-py falls back to its pure-Python parser and
command packer (the tests of rfetch without its default speed-ups; scripts/test-versions)."""

raise ImportError("hiredis hidden by tests/support/nospeedups")
