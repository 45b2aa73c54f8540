"""Every way a job ends, named once (:class:`JobOutcome`), mirrored by
``rfetch/lua/lib/outcome.lua``, whose ``OUTCOME_EFFECTS`` table says what each feature does
for each outcome (ordering key and unique lock released or kept, fetch cap's slot given
back, batch event, recorded result). ``tests/unit/test_job_record.py`` checks that the two
lists of names are the same.
"""

from __future__ import annotations

from enum import Enum


class JobOutcome(str, Enum):
    """How a job ended; the value is the name ``lib/outcome.lua`` knows.

    Attributes:
        SUCCEEDED: acknowledged after it ran (a batch's ``ok``, a recorded success).
        FAILED: to the retry set; its ordering key stays held (strict order survives
            retries), its unique lock too; a batch's ``fail``.
        SKIPPED: to the retry set with its ordering key released (``key_on_failure="skip"``).
        DIED: to the dead set; a batch's death.
        DISCARDED: failed and dropped (``retry: false`` with ``dead: false``, a discarding
            ``retry_in``); a batch's death.
        EXPIRED: not started before ``expires_in``; dropped, a batch's death.
        CANCELLED: cancelled (``rfetch.api.cancel``) while waiting or running; dead set or
            dropped as the cancel asked, a batch's death, a recorded ``cancelled``.
        DELETED: deleted from its queue by an admin action; no batch event.
        RESCHEDULED: over a limiter's limit, to the schedule set; key kept, no batch event.
        PUSHED_BACK: pushed back to the head of its queue (shutdown, pause, quiet).
        RECOVERED: pushed back from a dead process's private list (orphan recovery).
        POISON: recovered too often (a poison pill): to the dead set, a batch's death.
    """

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"
    DIED = "died"
    DISCARDED = "discarded"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    DELETED = "deleted"
    RESCHEDULED = "rescheduled"
    PUSHED_BACK = "pushed_back"
    RECOVERED = "recovered"
    POISON = "poison"
