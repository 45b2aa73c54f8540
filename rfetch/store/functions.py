"""rfetch's scripts as one Redis Functions library (Redis 7+), with EVALSHA as the fallback.

A script run by EVALSHA re-runs its whole text at every call: each shared library it
includes (``rfetch/lua/lib/``) builds its tables and closures again, which costs Redis CPU
on every fetch and acknowledgement. A Functions library runs that prelude once, at
``FUNCTION LOAD``; an ``FCALL`` then runs only the script's own body.

The library (:func:`library_source`) holds each shared library once, at its top, then one
function per script, ``rfetch_<digest>_<script>``, whose body is the script's text less its
``-- #include`` lines. ``KEYS`` and ``ARGV`` are locals of the library that each function
sets from its arguments first, so a script reads the same in both forms. The library's name
carries a digest of its text (``rfetch_<digest>``), so two rfetch versions sharing a Redis
load two libraries instead of replacing each other's.

:class:`LuaScript` is what :class:`rfetch.store.scripts.Scripts` holds for each script.
It calls ``FCALL`` and falls back to the script's EVALSHA (redis-py's
:class:`~redis.commands.core.Script`, which loads a missing script itself) when:

* the server has no Functions (Redis < 7: ``unknown command``) or an ACL refuses
  ``FCALL``/``FUNCTION``: then for good, on that client;
* the server refuses the call before running it because it is out of memory (``OOM``, a
  function without the ``allow-oom`` flag): that call only, so a script runs at
  ``maxmemory`` as an EVAL does (its writes that free memory done, the first that may
  grow it refused);
* the call is queued on a pipeline (a ``MULTI`` cannot load a missing library half-way).

A missing library (``Function not found``: a restarted Redis without persistence, a
``FUNCTION FLUSH``, a new Sentinel primary that never had it) is loaded with ``FUNCTION
LOAD REPLACE`` (on every primary of a Redis Cluster) and the call made again, as redis-py
does for ``NOSCRIPT``; the first large call on a client asks first (:data:`LARGE_CALL`),
so a bulk push to a fresh Redis is not sent twice. Functions are replicated like data, so
a replica promoted by a failover usually has the library already.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import Any

from redis import Redis
from redis.client import Pipeline
from redis.cluster import ClusterPipeline, RedisCluster
from redis.commands.core import Script
from redis.exceptions import NoPermissionError, OutOfMemoryError, ResponseError
from redis.typing import EncodableT

INCLUDE = re.compile(r"^-- #include (\w+)$", re.MULTILINE)
"""A line that puts ``rfetch/lua/lib/<name>.lua`` in its place (once per script)."""

LIBRARY_PREFIX = "rfetch_"
"""Every rfetch library's name starts so, then 12 hex digits of its text's SHA-1."""

LARGE_CALL = 256
"""Arguments from which the first call on a client asks first whether the library is loaded
(``FUNCTION LIST``, one round trip), so that a large call (a bulk push) is not sent twice
to a server that does not have it yet: a fresh Redis."""


def expand(text: str, seen: set[str], read_lib: Callable[[str], str]) -> str:
    """``text`` with each ``-- #include <name>`` line replaced by ``read_lib(name)``
    (itself expanded), or by nothing for a name already in ``seen`` (which is updated)."""

    def library(match: re.Match[str]) -> str:
        lib = match.group(1)
        if lib in seen:
            return ""
        seen.add(lib)
        return expand(read_lib(lib), seen, read_lib)

    return INCLUDE.sub(library, text)


def library_source(
    scripts: Sequence[tuple[str, str]], read_lib: Callable[[str], str]
) -> tuple[str, str]:
    """The library of ``scripts`` ((name, unexpanded text) pairs), as (library name, source
    for ``FUNCTION LOAD``); ``read_lib(name)`` is a shared library's text. The function of
    script ``s`` is named ``<library name>_<s>``."""
    seen: set[str] = set()
    top: list[str] = []
    bodies: list[tuple[str, str]] = []
    for name, text in scripts:
        for match in INCLUDE.finditer(text):
            top.append(expand(match.group(0), seen, read_lib))
        bodies.append((name, INCLUDE.sub("", text)))
    code = "local KEYS, ARGV\n" + "\n".join(top)
    digest = hashlib.sha1(
        (code + "".join(f"\0{n}\0{b}" for n, b in bodies)).encode()
    ).hexdigest()[:12]
    library = LIBRARY_PREFIX + digest
    for name, body in bodies:
        code += (
            f"\nredis.register_function('{library}_{name}', function(keys, args)\n"
            f"KEYS, ARGV = keys, args\n{body}\nend)\n"
        )
    return library, f"#!lua name={library}\n{code}"


class Library:
    """One library on one client, and whether that client's server runs it.

    Args:
        name: the library's name (``rfetch_<digest>``).
        source: its text for ``FUNCTION LOAD``.
    """

    def __init__(self, name: str, source: str) -> None:
        self.name = name
        self.source = source
        self.usable = True  # False once the server showed it has no Functions for us
        self.looked = False  # True once a large call asked whether it is loaded

    def missing(self, client: Redis | RedisCluster) -> bool:
        """Whether the server says it does not have the library (``FUNCTION LIST``);
        False when it may not be asked (an ACL, no Functions: the call finds out)."""
        try:
            return not client.function_list(library=self.name)
        except ResponseError:
            return False

    def load(self, client: Redis | RedisCluster) -> None:
        """``FUNCTION LOAD REPLACE`` the library (on every primary of a Redis Cluster).

        Raises:
            redis.exceptions.ResponseError: the server refused it (the caller decides).
        """
        client.function_load(self.source, replace=True)


def _without_functions(exc: ResponseError) -> bool:
    """Whether ``exc`` says the server cannot or may not run Functions for us."""
    text = str(exc).lower()
    return isinstance(exc, NoPermissionError) or "unknown command" in text


class LuaScript:
    """One script: ``FCALL`` of its function in ``library``, else the EVALSHA of ``script``
    (see the module's docstring for when).

    Args:
        name: the script's name (``rfetch/lua/<name>.lua``).
        library: the library holding its function, shared by the client's scripts.
        fallback: the script registered on the client for EVALSHA (its text expanded).
    """

    def __init__(self, name: str, library: Library, fallback: Script) -> None:
        self.name = name
        self.library = library
        self.fallback = fallback
        self.function = f"{library.name}_{name}"

    @property
    def script(self) -> str:
        """The script's text with its includes expanded (for an EVAL)."""
        return str(self.fallback.script)

    def command(self, keys: Sequence[str], args: Sequence[EncodableT]) -> tuple[EncodableT, ...]:
        """The call as one command's parts, for a caller that sends it itself (appended to
        a blocking command's connection): ``FCALL`` of the function, or ``EVALSHA`` when
        the server has shown it has no Functions for us. No load on a "function not found"
        or ``NOSCRIPT`` reply: the caller then runs the script the usual way."""
        if self.library.usable:
            return ("FCALL", self.function, len(keys), *keys, *args)
        return ("EVALSHA", self.fallback.sha, len(keys), *keys, *args)

    def __call__(
        self,
        keys: Sequence[str] = (),
        args: Sequence[EncodableT] = (),
        client: Redis | Pipeline | None = None,
    ) -> Any:
        """Run the script on ``client`` (default: the client it was registered on) and
        return its reply (a pipeline's: queued, answered at execute).

        Raises:
            redis.exceptions.ResponseError: the script's own error reply, or the server's.
        """
        target = self.fallback.registered_client if client is None else client
        if isinstance(target, Pipeline | ClusterPipeline) or not self.library.usable:
            return self.fallback(keys=keys, args=args, client=target)
        if not self.library.looked and len(args) >= LARGE_CALL:
            self.library.looked = True
            if self.library.missing(target):
                return self._load_and_call(target, keys, args)
        try:
            return target.fcall(self.function, len(keys), *keys, *args)
        except OutOfMemoryError:
            return self.fallback(keys=keys, args=args, client=target)
        except ResponseError as exc:
            if _without_functions(exc):
                self.library.usable = False
                return self.fallback(keys=keys, args=args, client=target)
            if "function not found" not in str(exc).lower():
                raise
        return self._load_and_call(target, keys, args)

    def _load_and_call(
        self, target: Redis | RedisCluster, keys: Sequence[str], args: Sequence[EncodableT]
    ) -> Any:
        """Load the library (missing on the server) and call the function again."""
        try:
            self.library.load(target)
        except ResponseError as exc:
            if not _without_functions(exc):
                raise
            self.library.usable = False
            return self.fallback(keys=keys, args=args, client=target)
        return target.fcall(self.function, len(keys), *keys, *args)
