"""A module that defines no job class (``-r nojobs`` must be warned about)."""

RATE = 0.2
