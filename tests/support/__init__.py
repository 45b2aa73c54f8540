"""Test helpers: a private redis-server and real worker processes."""
