"""An application process for the outbox chaos test: transaction after transaction, it
inserts an order row and pushes a job for it in the same transaction
(``rfetch.outbox.using``), rolls back one in five, and now and then SIGKILLs itself right
after a commit. The test also SIGKILLs it at random points. The truth is the database: the
committed ``orders`` rows.

Run: ``python -m tests.support.outbox_app DATABASE_URL REDIS_URL SEED``.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import uuid

import rfetch
from rfetch.config import Config
from rfetch.outbox.connection import connect
from rfetch.push.client import Client

ROLLBACK = 0.2
"""The share of transactions rolled back."""

SELF_KILL = 0.02
"""The chance of a SIGKILL right after a commit."""


def main(url: str, redis_url: str, seed: int) -> None:
    rng = random.Random(seed)
    client = Client(Config(redis_url=redis_url))  # inside using(): never writes to Redis
    db = connect(url)
    insert = f"INSERT INTO orders (id) VALUES ({db.dialect.mark})"
    while True:
        order = uuid.uuid4().hex
        db.begin()
        db.execute(insert, (order,))
        with rfetch.outbox.using(db.conn):
            client.push("outbox_jobs.Ship", [order])
        if rng.random() < ROLLBACK:
            db.rollback()
            continue
        db.commit()
        if rng.random() < SELF_KILL:
            os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
