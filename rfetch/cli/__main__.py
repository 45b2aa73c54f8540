"""``python -m rfetch.cli``: the same as the ``rfetch`` command."""

from rfetch.cli import main

main()
