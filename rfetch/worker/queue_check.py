"""The start-up check of ``rfetch worker -q``: a queue that no registered job class uses is
warned about (``-q mial`` for ``mail``), not refused, as a queue fed by another client (a
Ruby process, ``.set(queue=...)``, ``rfetch enqueue -q``) is legitimate."""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable

from rfetch.jobs.job import Job

log = logging.getLogger("rfetch.registry")


def job_queues(classes: Iterable[type[Job]]) -> set[str]:
    """The queues the job classes push to by default, and their ``retry_queue``."""
    queues: set[str] = set()
    for cls in classes:
        queues.add(cls.queue)
        if cls.retry_queue:
            queues.add(cls.retry_queue)
    return queues


def warn_unused_queues(queues: Iterable[str], classes: Iterable[type[Job]]) -> list[str]:
    """Log a warning for each of the worker's ``queues`` that none of ``classes`` (the
    registered job classes; none: no check) uses, naming the queues they use and a close
    name. Returns the queues warned about."""
    used = job_queues(classes)
    if not used:
        return []
    unused = [q for q in queues if q not in used]
    for queue in unused:
        close = difflib.get_close_matches(queue, sorted(used), n=1, cutoff=0.6)
        log.warning(
            "-q %s: no registered job class uses this queue (theirs: %s)%s; fine if another "
            "client (a Ruby process, .set(queue=...)) pushes to it",
            queue, ", ".join(sorted(used)), f"; did you mean -q {close[0]}?" if close else "",
        )
    return unused
