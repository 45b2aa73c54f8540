"""The transactional outbox: enqueue in the application's own database transaction, relayed
to Redis, each job exactly once (docs/outbox.md).

- :func:`using` (:mod:`.context`): ``with rfetch.outbox.using(conn):`` around pushes makes
  them rows of ``rfetch_outbox`` in ``conn``'s transaction;
- :mod:`.dialects`: the table's SQL for PostgreSQL, SQLite, MySQL/MariaDB (:func:`schema`);
- :mod:`.connection`: the application's connection (DB-API or SQLAlchemy), the relay's;
- :mod:`.relay`: the relay (``rfetch relay``), :mod:`.listener`: what it sleeps on (NOTIFY);
- :mod:`.service`: a relay built from a Config and a database URL;
- :mod:`.backlog`: the backlog's size and age, and one jid's row (the faces).
"""

from __future__ import annotations

from rfetch.outbox.context import current, using
from rfetch.outbox.dialects import schema

__all__ = ["current", "schema", "using"]
