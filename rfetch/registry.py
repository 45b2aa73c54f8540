"""Which job names a worker will run.

A worker runs only the job classes defined by the modules it was told to import (``-r``):
it never imports or calls anything a payload names (issue #2). The registry is built once
at start-up from the subclasses of :class:`rfetch.Job` that exist after those imports;
no global registry is kept.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from rfetch.errors import ConfigError, DuplicateJobName
from rfetch.job import Job


def _all_subclasses(cls: type[Job]) -> Iterator[type[Job]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _all_subclasses(sub)


class Registry:
    """Job name -> job class.

    Args:
        classes: the job classes; abstract ones (whose ``perform`` is Job's) are skipped.

    Raises:
        DuplicateJobName: two different classes claim one name.
    """

    def __init__(self, classes: Iterable[type[Job]]) -> None:
        self._by_name: dict[str, type[Job]] = {}
        for cls in classes:
            if cls.perform is Job.perform:
                continue
            name = cls.job_name()
            other = self._by_name.get(name)
            if other is not None and other is not cls:
                raise DuplicateJobName(
                    f"job name {name!r} is claimed by {other.__module__}.{other.__qualname__} "
                    f"and {cls.__module__}.{cls.__qualname__}; give one of them another name"
                )
            self._by_name[name] = cls

    @classmethod
    def from_loaded(cls) -> Registry:
        """Every concrete Job subclass defined so far in this process."""
        return cls(_all_subclasses(Job))

    def get(self, name: str) -> type[Job] | None:
        """The class registered under ``name``, or None."""
        return self._by_name.get(name)

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)


def require(target: str) -> None:
    """Import the jobs module named by ``-r``: a module path (``myapp.jobs``) or a file path.

    A file is imported under its own name with its folder put first on ``sys.path``, so its
    job classes are registered as ``<file stem>.<Class>``, the same name a client that
    imports that module pushes. A folder is imported as a package.

    Raises:
        ConfigError: the module or file cannot be found.
        Exception: whatever the module raises when imported.
    """
    path = Path(target)
    if target.endswith(".py") or path.is_dir():
        if not path.exists():
            raise ConfigError(f"-r {target}: no such file or folder")
        path = path.resolve()
        folder = path.parent
        module_name = path.stem if path.is_file() else path.name
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
        importlib.import_module(module_name)
        return
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)  # as `python -m` does, so `-r myapp.jobs` finds ./myapp
    if importlib.util.find_spec(target.split(".")[0]) is None:
        raise ConfigError(f"-r {target}: no module named {target.split('.')[0]!r}")
    importlib.import_module(target)
