"""Every exception rfetch raises on purpose."""

from __future__ import annotations


class RfetchError(Exception):
    """Base class of rfetch's own errors."""


class ConfigError(RfetchError, ValueError):
    """A configuration value is out of range or malformed."""


class ArgsNotSerializable(RfetchError, TypeError):
    """Job arguments contain a value that is not native JSON.

    Only ``str``, ``int``, ``float`` (finite), ``bool``, ``None``, ``list`` and ``dict`` with
    ``str`` keys travel, as with Sidekiq's strict args. The message names the path of the
    first bad value, e.g. ``args[1]['when']``.
    """


class PayloadTooLarge(RfetchError, ValueError):
    """The serialised job is larger than ``Config.max_payload_bytes``; nothing was written."""


class UnknownJob(RfetchError):
    """A worker fetched a job whose class name no imported module registered.

    The job fails and is retried (then dies), so a deploy skew loses nothing.
    """


class InvalidJob(RfetchError):
    """A fetched payload is not a job: bad JSON or a wrong shape. It goes to the dead set."""


class DuplicateJobName(RfetchError):
    """Two job classes registered the same name in one worker."""


class BufferFull(RfetchError):
    """Redis is unreachable and the client's reliable-push buffer is full; the job was not
    accepted (never dropped silently; Sidekiq Pro 7.1.4 also raises here)."""


class ArgsMismatch(RfetchError, TypeError):
    """A push's arguments do not fit the job's ``perform`` (too few, too many, or a
    keyword-only parameter without a default). Raised at push time, when the job class is
    known, instead of failing in the worker on every retry; nothing was written."""


class UnrunnableJobWarning(UserWarning):
    """A job is pushed under a name no worker can register: its class is defined in
    ``__main__`` (the script being run), which a worker imports under the module's own
    name. Define job classes in a module the script imports, or give the class a ``name``."""
