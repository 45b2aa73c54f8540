"""``rfetch worker --processes N``: one parent supervising N worker processes.

Sidekiq Enterprise's swarm. :mod:`~rfetch.swarm.supervisor` decides (which child to start,
signal, replace or kill), :mod:`~rfetch.swarm.runtime` does (fork, signals, reaping, the
status pipes), :mod:`~rfetch.swarm.channel` is what a child tells its parent, and
:mod:`~rfetch.swarm.policy` holds the restart and recycling rules. See docs/operations.md.
"""
