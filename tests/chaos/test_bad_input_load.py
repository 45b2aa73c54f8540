"""Bad input under load, the part ``tests/integration/test_bad_input.py``
does not cover: huge payloads that reach the worker side (LPUSHed raw by a foreign or
broken producer, bypassing the client's 1 MiB limit), mixed into a stream of good jobs
taken by two worker processes.

A 5 MB job runs (or dies cleanly); 5 MB of invalid JSON goes to the dead set exactly as it
was; a 5 MB job of an unknown class dies with ``UnknownJob``; the workers keep running and
every good job runs exactly once.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from rfetch.config import Config
from rfetch.jobs.payload import new_jid
from rfetch.push.client import Client
from tests.support.chaos import Evidence, Fleet, leftovers, private_lists
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

SIZE = 5_000_000


def raw_job(class_name: str, args: list[object], **extra: object) -> tuple[str, bytes]:
    jid = new_jid()
    payload = {"class": class_name, "args": args, "jid": jid, "queue": "default",
               "created_at": 1.0, "enqueued_at": 1.0, **extra}
    return jid, json.dumps(payload).encode()


def test_huge_and_malformed_payloads_among_good_jobs(
    own_redis: RedisServer, tmp_path: Path, say: Callable[[str], None]
) -> None:
    evidence_dir = tmp_path / "evidence"
    evidence_dir.mkdir()
    fleet = Fleet(own_redis.url, tmp_path, evidence_dir, ["-c", "4"])
    evidence = Evidence(evidence_dir)
    admin = own_redis.client(socket_timeout=10)
    client = Client(Config(redis_url=own_redis.url))
    big_jid, big = raw_job("chaos_jobs.Big", ["x" * SIZE])
    unknown_jid, unknown = raw_job("nowhere.Missing", ["y" * SIZE], retry=0)
    invalid = b'{"class":"chaos_jobs.Big","args":["' + b"z" * SIZE  # cut short: not JSON
    small_bad = [b"null", b'{"class":"chaos_jobs.Work","args":{"ms":1}}', b"\xff\xfe"]
    try:
        for _ in range(2):
            fleet.start()
        for proc in fleet.live:
            proc.identity(admin)
        jids: list[str] = []
        for bad in (big, invalid, unknown, *small_bad):
            jids += client.push_bulk("chaos_jobs.Work", [[n % 3] for n in range(300)])
            admin.lpush("queue:default", bad)
        jids += client.push_bulk("chaos_jobs.Work", [[n % 3] for n in range(300)])

        expected_dead = 2 + len(small_bad)  # invalid, unknown, the small ones

        def finished() -> bool:
            evidence.poll()
            return (
                not evidence.lost(jids)
                and (evidence.dones[big_jid] > 0 or admin.zcard("dead") > expected_dead)
                and admin.zcard("dead") >= expected_dead
                and not admin.exists("queue:default")
                and not private_lists(admin)
            )

        wait_for(finished, 60, lambda: f"the good jobs to finish\n{fleet.logs()[-5000:]}")
        dead = admin.zrange("dead", 0, -1)
        say(
            f"{len(jids)} good jobs: {len(evidence.lost(jids))} not run, "
            f"{evidence.duplicates()} run twice; 5 MB job run {evidence.dones[big_jid]} time(s); "
            f"dead set: {len(dead)} entries, sizes {sorted(len(d) for d in dead)}"
        )

        assert evidence.lost(jids) == []
        assert evidence.duplicates() == 0
        if evidence.dones[big_jid]:  # it ran, with all of its argument
            assert evidence.dones[big_jid] == 1
            assert evidence.extra[big_jid].strip() == str(SIZE)
            assert big not in dead
        else:  # or it died cleanly, with a reason
            assert json.loads(next(d for d in dead if big_jid.encode() in d))["error_class"]
        assert invalid in dead  # exactly as it was
        assert all(bad in dead for bad in small_bad)
        unknown_dead = [json.loads(d) for d in dead if unknown_jid.encode() in d]
        assert len(unknown_dead) == 1
        assert unknown_dead[0]["error_class"] == "rfetch.errors.UnknownJob"
        assert unknown_dead[0]["args"] == ["y" * SIZE]
        assert admin.zcard("retry") == 0
        assert all(p.proc.poll() is None for p in fleet.live)
        # The workers go on taking jobs after all that.
        more = client.push_bulk("chaos_jobs.Work", [[0]] * 50)
        wait_for(lambda: not evidence.poll().lost(more), 10, "the later jobs to run")
        assert fleet.reap_exited() == []
        assert fleet.stop_all() == [0, 0]
        admin.delete("dead")
        assert leftovers(admin) == {}
    finally:
        fleet.kill_all()
        admin.close()
