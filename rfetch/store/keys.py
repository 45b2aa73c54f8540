"""Every Redis key name rfetch uses, in one place (Sidekiq 7's data model).

See ``docs/data-model.md``. All keys take the optional namespace prefix ``<ns>:``.
"""

from __future__ import annotations

from dataclasses import dataclass

PRIVATE_PREFIX = "queue:sq|"
"""Sidekiq Pro super_fetch private lists: ``queue:sq|<identity>|<queue>``."""


@dataclass(frozen=True)
class Keys:
    """Key names under one namespace."""

    namespace: str | None = None

    def _k(self, name: str) -> str:
        return f"{self.namespace}:{name}" if self.namespace else name

    def strip(self, key: str) -> str:
        """The key without the namespace prefix."""
        prefix = f"{self.namespace}:" if self.namespace else ""
        return key[len(prefix) :] if prefix and key.startswith(prefix) else key

    def queue(self, name: str) -> str:
        """Public queue list ``queue:<name>``; producers LPUSH, consumers take the right end."""
        return self._k(f"queue:{name}")

    @property
    def queues(self) -> str:
        """Set of every queue name ever pushed to."""
        return self._k("queues")

    @property
    def schedule(self) -> str:
        """Scheduled set: score = run time, epoch seconds."""
        return self._k("schedule")

    @property
    def retry(self) -> str:
        """Retry set: score = next retry time, epoch seconds."""
        return self._k("retry")

    @property
    def dead(self) -> str:
        """Dead set (morgue): score = time of death, epoch seconds."""
        return self._k("dead")

    @property
    def processes(self) -> str:
        """Set of live process identities."""
        return self._k("processes")

    def process(self, identity: str) -> str:
        """Heartbeat hash of one process."""
        return self._k(identity)

    def work(self, identity: str) -> str:
        """Busy threads of one process: thread id -> JSON ``{queue, payload, run_at}``."""
        return self._k(f"{identity}:work")

    def workers(self, identity: str) -> str:
        """The same busy threads under Sidekiq 6's name (its API and Web UI read this)."""
        return self._k(f"{identity}:workers")

    def started(self, identity: str) -> str:
        """Start marks: slot (thread or loop slot) -> payload it started last (orphan recovery)."""
        return self._k(f"{identity}:started")

    def signals(self, identity: str) -> str:
        """Remote-control list of one process (``TSTP``, ``TERM``, ``TTIN``)."""
        return self._k(f"{identity}-signals")

    def cancel(self, jid: str) -> str:
        """Cancel mark of one job (string, JSON ``{reason, dead, at}``, 24 h TTL): every
        worker holding or fetching the job cancels it (``rfetch.api.cancel``)."""
        return self._k(f"cancel:{jid}")

    @property
    def cancels(self) -> str:
        """Sorted set: jid -> expiry of its cancel mark (epoch s), loaded by a worker when it
        subscribes to :attr:`cancel_channel`: it asks Redis about those jids only."""
        return self._k("rfetch:cancels")

    @property
    def cancel_channel(self) -> str:
        """Pub/sub channel on which ``rfetch.api.cancel`` announces a jid, so workers stop
        it before it starts."""
        return self._k("rfetch:cancel")

    def private(self, identity: str, queue: str) -> str:
        """Private (processing) list of one process for one queue."""
        return self._k(f"{PRIVATE_PREFIX}{identity}|{queue}")

    def private_pattern(self) -> str:
        """SCAN pattern matching every private list."""
        return self._k(f"{PRIVATE_PREFIX}*")

    def parse_private(self, key: str) -> tuple[str, str] | None:
        """``(identity, queue)`` of a private list key, or None if it is not one.

        Identities (``host:pid:hex``) contain no ``|``; queue names may.
        """
        bare = self.strip(key)
        if not bare.startswith(PRIVATE_PREFIX):
            return None
        identity, sep, queue = bare[len(PRIVATE_PREFIX) :].partition("|")
        return (identity, queue) if sep and identity and queue else None

    @property
    def paused(self) -> str:
        """Set of paused queue names: workers take no job from them."""
        return self._k("paused")

    @property
    def pause_channel(self) -> str:
        """Pub/sub channel on which a pause or unpause is announced, so workers act at once."""
        return self._k("rfetch:pause")

    @property
    def ack_mark_channel(self) -> str:
        """Channel of the ``PUBLISH`` after acknowledgements with ``min_replicas_acks``: no
        listener; it moves the offset its ``WAIT`` covers (:mod:`rfetch.worker.ack_replicas`)."""
        return self._k("rfetch:ack-mark")

    @property
    def identities(self) -> str:
        """rfetch's own hash: identity -> JSON list of its queues, for every process that may
        own private lists. Unlike ``processes``, Sidekiq's ProcessSet cleanup never removes
        a dead identity from it, so orphan recovery can always find the dead."""
        return self._k("rfetch:identities")

    @property
    def suspects(self) -> str:
        """Hash: identity -> JSON ``{"since": Redis time (epoch s) its heartbeat was first
        seen missing, "queues": [names of its private lists]}``."""
        return self._k("rfetch:suspects")

    @property
    def recovery_lock(self) -> str:
        """Lock held by the one process that recovers orphans at a time."""
        return self._k("rfetch:lock:recovery")

    def iteration(self, jid: str) -> str:
        """State of one iterable job (hash, Sidekiq 7.3's ``it-<jid>``): ``ex`` executions,
        ``c`` the JSON cursor, ``rt`` runtime in seconds, ``cancelled`` epoch seconds of a
        cancel; kept 30 days after its last write, deleted when the job completes."""
        return self._k(f"it-{jid}")

    def steps(self, jid: str) -> str:
        """Recorded results of one job's durable steps (hash: step name -> JSON result),
        kept 30 days after its last write (``Job.step``)."""
        return self._k(f"rfetch:steps:{jid}")

    def recoveries(self, jid: str) -> str:
        """How often a job was recovered from dead processes (expires after the window)."""
        return self._k(f"rfetch:recoveries:{jid}")

    @property
    def prefix(self) -> str:
        """The namespace prefix (``""`` or ``"<ns>:"``): scripts derive keys from it
        (``rfetch/lua/lib/keys.lua``); with a ``{tag}`` namespace, in its hash slot."""
        return f"{self.namespace}:" if self.namespace else ""

    def key_holders(self, queue: str) -> str:
        """Hash: ordering key -> jid of the one job of that key that is out (in the queue, a
        private list, or the retry set) for ``queue`` (ordering keys)."""
        return self._k(f"rfetch:key-holders:{queue}")

    def key_list(self, queue: str, key: str) -> str:
        """List of the jobs of one ordering key waiting for their turn: newest at the left,
        the next to go out at the right."""
        return self._k(f"rfetch:key:{queue}:{key}")

    def key_list_pattern(self, queue: str) -> str:
        """SCAN pattern matching every key list of ``queue`` (glob characters escaped)."""
        escaped = "".join(f"\\{c}" if c in "*?[]\\" else c for c in queue)
        return self._k(f"rfetch:key:{escaped}:*")

    def key_leases(self, queue: str) -> str:
        """Sorted set: ordering key -> lease expiry (Redis time, float epoch seconds) while
        the key's holder runs; renewed by the heartbeat, read by stuck-key rescue."""
        return self._k(f"rfetch:key-leases:{queue}")

    def fair_ring(self, queue: str) -> str:
        """List: ring of the tenants of ``queue`` that have pending jobs, each once; the
        head (next to give a job) is the right end (fair tenants)."""
        return self._k(f"rfetch:fair:{queue}")

    def fair_tenant(self, queue: str, tenant: str) -> str:
        """List: one tenant's pending jobs in ``queue``, newest left, oldest right: the ring
        key, ``|`` and the tenant (scripts derive it from the ring key they are given)."""
        return self._k(f"rfetch:fair:{queue}|{tenant}")

    def fair_credits(self, queue: str) -> str:
        """Hash: tenant -> jobs left in its current turn of the ring."""
        return self._k(f"rfetch:fair-credits:{queue}")

    def fair_weights(self, queue: str) -> str:
        """Hash: tenant -> weight (jobs per turn; default 1)."""
        return self._k(f"rfetch:fair-weights:{queue}")

    def fair_wake(self, queue: str) -> str:
        """List holding one token, pushed when a tenant joins the ring: idle workers whose
        first queue is fair wait on it (BLPOP) instead of the public queue."""
        return self._k(f"rfetch:fair-wake:{queue}")

    @property
    def fair_queues(self) -> str:
        """Set of the queues that have had tenant jobs (workers fetch them fairly)."""
        return self._k("rfetch:fair-queues")

    def cap_ring(self, queue: str) -> str:
        """List: the ready ring of ``queue``'s concurrency keys (fetch caps): keys with
        waiting jobs and a free slot, each once; the head is the right end."""
        return self._k(f"rfetch:cap:{queue}")

    def cap_list(self, queue: str, key: str) -> str:
        """List: the waiting jobs of one concurrency key, newest left: the ring key, ``|``
        and the key (scripts derive it from the ring key they are given)."""
        return self._k(f"rfetch:cap:{queue}|{key}")

    def cap_list_pattern(self, queue: str) -> str:
        """SCAN pattern matching every concurrency key's waiting list of ``queue``."""
        escaped = "".join(f"\\{c}" if c in "*?[]\\" else c for c in queue)
        return self._k(f"rfetch:cap:{escaped}|*")

    def cap_held(self, queue: str) -> str:
        """Hash: concurrency key -> jobs of the key holding a slot (fetched, not finished)."""
        return self._k(f"rfetch:cap-held:{queue}")

    def cap_slots(self, queue: str) -> str:
        """Hash: jid -> concurrency key, for every job holding a slot of ``queue``."""
        return self._k(f"rfetch:cap-slots:{queue}")

    def cap_limits(self, queue: str) -> str:
        """Hash: concurrency key -> its limit (the latest pushed)."""
        return self._k(f"rfetch:cap-limits:{queue}")

    @property
    def cap_queues(self) -> str:
        """Set of the queues that have had capped jobs (workers fetch their ready ring)."""
        return self._k("rfetch:cap-queues")

    def prio(self, queue: str) -> str:
        """Sorted set of ``queue``'s jobs with a priority other than 0 (``lib/priority.lua``):
        payload -> score, lowest (highest priority, then oldest) fetched first."""
        return self._k(f"rfetch:prio:{queue}")

    @property
    def prio_queues(self) -> str:
        """Hash: queue name -> its priority jobs' push sequence (HINCRBY): the queues that
        have had priority jobs (workers fetch their :meth:`prio` set)."""
        return self._k("rfetch:prio-queues")

    @property
    def expired(self) -> str:
        """Counter of jobs dropped because they were not started before ``expires_in``."""
        return self._k("stat:expired")

    @property
    def expired_queues(self) -> str:
        """Hash: queue name -> jobs of the queue dropped as expired (``expires_in``)."""
        return self._k("rfetch:expired")

    def unique(self, digest: str) -> str:
        """Unique-job lock: value = jid of the job holding it, expires after ``unique_for``."""
        return self._k(f"rfetch:unique:{digest}")

    def outbox_marker(self, jid: str) -> str:
        """Marker of a job the outbox relay pushed (``push_once.lua``), for its TTL."""
        return self._k(f"rfetch:outbox:pushed:{jid}")

    def metrics(self, minute: str) -> str:
        """Per-class counts and run-time histogram of one UTC minute (``YYYYmmddHHMM``)."""
        return self._k(f"rfetch:metrics:{minute}")

    def stat(self, name: str, day: str | None = None) -> str:
        """``stat:processed`` / ``stat:failed``, or the daily ``stat:<name>:YYYY-MM-DD``."""
        return self._k(f"stat:{name}:{day}" if day else f"stat:{name}")

    @property
    def leader(self) -> str:
        """Hash of the leader lease (``token``, ``identity``, ``since``, ``renewed_at``),
        expiring ``leader_ttl`` after its last renewal (Sidekiq Enterprise's leader)."""
        return self._k("rfetch:leader")

    @property
    def leader_changes(self) -> str:
        """Counter of leader elections."""
        return self._k("rfetch:leader-changes")

    @property
    def leader_wake(self) -> str:
        """List a stepping-down leader pushes one element to; followers wait on it (BLPOP)."""
        return self._k("rfetch:leader-wake")

    @property
    def periodic(self) -> str:
        """Hash: periodic schedule name -> its definition (JSON), written by the leader."""
        return self._k("rfetch:periodic")

    def periodic_state(self, name: str) -> str:
        """Hash of one periodic schedule's state: ``cursor`` (last tick dealt with, epoch
        seconds), ``fingerprint``, ``paused``, last tick pushed and its jid, counts."""
        return self._k(f"rfetch:periodic:{name}")

    def periodic_tick(self, name: str, tick: int) -> str:
        """Marker of one pushed tick of a periodic schedule (value: the jid), kept for the
        catch-up window plus a margin."""
        return self._k(f"rfetch:periodic-tick:{name}:{tick}")

    # -- workflows: results, progress, dependencies (docs/workflows.md) -------------------

    def result(self, jid: str) -> str:
        """Recorded outcome of a ``store_result`` job (hash: ``status``, ``result``,
        ``error_class``, ``error_message``, ``finished_at``, ``class``), TTL its
        ``store_result`` seconds."""
        return self._k(f"rfetch:result:{jid}")

    def django_task(self, jid: str) -> str:
        """A Django task's attempts (``rfetch.integrations.django.tasks``; hash: ``task``,
        ``args``, ``kwargs``, ``enqueued_at``, ``started_at``, ``last_attempted_at``,
        ``worker_ids``, ``errors``, ``state``), written by the worker around each run and
        kept as long as its record (``result``) plus an hour."""
        return self._k(f"rfetch:django-task:{jid}")

    def result_wake(self, jid: str) -> str:
        """Wake list of a recorded job: one token pushed with its record, which
        ``rfetch.result`` waits on (BLMOVE onto itself, so every waiter sees it)."""
        return self._k(f"rfetch:result-wake:{jid}")

    def dependents(self, jid: str) -> str:
        """The jobs waiting on ``jid`` (hash: waiting jid -> its payload)."""
        return self._k(f"rfetch:dependents:{jid}")

    @property
    def waiting(self) -> str:
        """Every waiting job (hash: jid -> JSON ``{after, since, class, queue}``)."""
        return self._k("rfetch:waiting")

    @property
    def deps_cancelled(self) -> str:
        """Count of waiting jobs dropped because their dependency died (``cancel``)."""
        return self._k("rfetch:deps-cancelled")

    @property
    def results_stored(self) -> str:
        """Count of outcomes recorded (successes and deaths of ``store_result`` jobs)."""
        return self._k("rfetch:results-stored")

    def progress(self, jid: str) -> str:
        """A running job's progress (string, JSON ``{percent, message, at}``), TTL 1 h."""
        return self._k(f"rfetch:progress:{jid}")

    # -- batches (Sidekiq Pro's names; see lib/batch.lua for the parts) --------------------

    def batch(self, bid: str) -> str:
        """Hash of one batch ``b-<bid>``: description, counters, callbacks' templates, the
        fire-once marks (Sidekiq Pro batches). Its other keys are this name plus a suffix
        (:data:`BATCH_PARTS`)."""
        return self._k(f"b-{bid}")

    def batch_part(self, bid: str, part: str) -> str:
        """One of a batch's other keys: ``b-<bid>-<part>``, ``part`` one of
        :data:`BATCH_PARTS`."""
        return self._k(f"b-{bid}-{part}")

    def batch_counter(self, event: str) -> str:
        """Count of batches ``created``, ``completed``, ``succeeded`` or ``died`` (string,
        INCR by the Lua call in which the event happened; Prometheus counters)."""
        return self._k(f"rfetch:batches-{event}")

    @property
    def batches(self) -> str:
        """Sorted set of batches: bid -> creation time (Redis time, float epoch seconds),
        trimmed to the batch TTL when a batch is created."""
        return self._k("batches")

    # -- limiters ----------------------------------------------------------------------------

    def limiter(self, name: str) -> str:
        """Hash of one limiter (``rfetch.Limiter``): its definition (``kind``, ``limit``,
        ``period`` ms), its state (the window's ``w`` / ``n``, the rate kinds' ``tat``, the
        concurrent kind's ``l:<token>`` locks) and its counters; expires after the
        limiter's ``ttl`` without a call."""
        return self._k(f"rfetch:limiter:{name}")

    @property
    def limiters(self) -> str:
        """Set of limiter names, added by every limiter call: how the web UI, the CLI and
        the API find them (a name whose hash expired is removed when they read it)."""
        return self._k("rfetch:limiters")


BATCH_PARTS = ("jids", "done", "failinfo", "died", "kids", "waiting-success", "waiting-complete")
"""The suffixes of a batch's keys besides its hash (``rfetch/lua/lib/batch.lua``)."""
