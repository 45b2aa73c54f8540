"""Which jobs an admin listing or action takes: :class:`JobFilter`, by class and by a
substring of the arguments or the error, with a cheap test on the stored bytes first."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from .records import JobRecord

_PLAIN = re.compile(r"[A-Za-z0-9_.@:-]+")
"""Characters that every JSON encoder writes as they are (no escaping)."""

_NOT_NUMERIC = re.compile(r"[A-DF-Za-df-z_@:]")
"""A character that cannot be part of a number, whose text differs between encoders
(``1e+20`` / ``1.0e+20``)."""


def _plain(word: str) -> bool:
    """Whether ``word`` appears byte for byte in every JSON text of a value holding it."""
    return bool(_PLAIN.fullmatch(word) and _NOT_NUMERIC.search(word))


@dataclass(frozen=True)
class JobFilter:
    """Which jobs to list or act on; an empty filter matches every job.

    Attributes:
        job_class: the class shown (:attr:`JobRecord.job_class`) or the payload's ``class``,
            exactly, or its last part after ``.`` or ``::`` (``SendWelcome`` matches
            ``myapp.jobs.SendWelcome``).
        grep: a substring, case-insensitive, of the JSON text of ``args`` or of
            ``error_message``. For an entry that is not a job, of its stored text.
    """

    job_class: str | None = None
    grep: str | None = None

    @property
    def empty(self) -> bool:
        """True when it matches everything."""
        return not self.job_class and not self.grep

    def matches(self, job: JobRecord) -> bool:
        """Whether ``job`` passes the filter."""
        if self._rejects_bytes(job.raw):
            return False
        if self.job_class and not self._class_matches(job):
            return False
        if self.grep:
            needle = self.grep.casefold()
            if job.payload is None:
                return needle in job.value.casefold()
            args_text = json.dumps(job.args, separators=(",", ":"), ensure_ascii=False)
            if needle in args_text.casefold():
                return True
            return needle in (job.error_message or "").casefold()
        return True

    def _rejects_bytes(self, raw: bytes) -> bool:
        """A cheap test on the stored bytes that saves parsing most entries a filter
        rejects. Only for words made of characters that JSON writes as they are, whatever
        the producer's spacing or escaping."""
        if self.job_class and _plain(self.job_class) and self.job_class.encode() not in raw:
            return True
        return bool(
            self.grep and _plain(self.grep) and self.grep.lower().encode() not in raw.lower()
        )

    def _class_matches(self, job: JobRecord) -> bool:
        if job.payload is None:
            return False
        wanted = self.job_class or ""
        for name in {job.job_class, job.payload_class or ""}:
            if name == wanted or name.endswith(("." + wanted, "::" + wanted)):
                return True
        return False
