"""Which job names a worker will run.

A worker runs only the job classes defined by the modules it was told to import (``-r``):
it never imports or calls anything a payload names (no code from the wire). The registry is
built once at start-up from the subclasses of :class:`rfetch.Job` that exist after those imports;
no global registry is kept.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import ModuleType

from rfetch.config import Config
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
        kinds = {cls.is_async for cls in self._by_name.values()}
        self.has_async = True in kinds
        """Whether any class is async (``async def perform``): the worker runs an event loop."""
        self.has_sync = False in kinds or not kinds
        """Whether any class is sync (or none is registered): the worker's threads run jobs."""

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


def require(target: str) -> ModuleType:
    """Import the jobs module named by ``-r``: a module path (``myapp.jobs``) or a file path.

    A file is imported under its own name with its folder put first on ``sys.path``, so its
    job classes are registered as ``<file stem>.<Class>``, the same name a client that
    imports that module pushes. A folder is imported as a package.

    Returns:
        The imported module.

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
        return importlib.import_module(module_name)
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)  # as `python -m` does, so `-r myapp.jobs` finds ./myapp
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        # Only the target itself (or a package on its path, e.g. a typo in
        # `myapp.jobz`) missing is a configuration error; a found module that imports a
        # missing dependency raises as it is.
        missing = exc.name or ""
        if missing and (target == missing or target.startswith(missing + ".")):
            raise ConfigError(f"-r {target}: no module named {missing!r}") from None
        raise


def configure_from(modules: Iterable[ModuleType], config: Config) -> None:
    """Call ``configure_worker(config)`` of every ``-r`` module that defines one.

    This is how a module run by ``rfetch worker`` adds server middleware, error and death
    handlers or ``on_recovery`` (Sidekiq's ``configure_server``)::

        def configure_worker(config: rfetch.Config) -> None:
            config.server_middleware.append(timing)
            config.death_handlers.append(page_someone)

    Raises:
        ConfigError: ``configure_worker`` is not callable, or left the Config invalid.
    """
    for module in modules:
        hook = getattr(module, "configure_worker", None)
        if hook is None:
            continue
        if not callable(hook):
            raise ConfigError(f"{module.__name__}.configure_worker is not callable")
        hook(config)
    config.validate()
