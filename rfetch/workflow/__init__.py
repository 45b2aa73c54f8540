"""Workflows on rfetch's reliable core: recorded results, progress, job dependencies and
chains (see docs/workflows.md)."""
