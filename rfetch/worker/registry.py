"""Which job names a worker will run.

A worker runs only the job classes defined by the modules it was told to import (``-r``):
it never imports or calls anything a payload names (no code from the wire). The registry is
built once at start-up from the subclasses of :class:`rfetch.Job` that exist after those imports;
no global registry is kept.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import ModuleType

from rfetch.config import Config
from rfetch.errors import ConfigError, DuplicateJobName, RequireFailed
from rfetch.jobs.job import Job

log = logging.getLogger("rfetch.registry")


def _all_subclasses(cls: type[Job]) -> Iterator[type[Job]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _all_subclasses(sub)


class Registry:
    """Job name -> job class.

    Args:
        classes: the job classes; abstract ones are skipped: those whose ``perform`` is
            Job's, and a base class that says so in its own namespace
            (``__abstract_job__ = True``, as ``rfetch.IterableJob`` does).

    Raises:
        DuplicateJobName: two different classes claim one name.
    """

    def __init__(self, classes: Iterable[type[Job]]) -> None:
        self._by_name: dict[str, type[Job]] = {}
        for cls in classes:
            if cls.perform is Job.perform or cls.__dict__.get("__abstract_job__", False):
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


def require(target: str) -> list[ModuleType]:
    """Import the jobs named by ``-r``: a module path (``myapp.jobs``), a file path
    (``./myapp/jobs.py``) or a package folder (``./myapp``).

    - A module path is imported as it is, from the current folder (as ``python -m``).
    - A file is imported under the name an application that imports it uses: inside a
      package (folders with ``__init__.py``), its dotted path from the outermost one
      (``myapp/jobs.py`` -> ``myapp.jobs``, with the folder above ``myapp`` put first on
      ``sys.path``); otherwise its stem, with its own folder first on ``sys.path``. Its
      job classes are therefore registered as ``myapp.jobs.<Class>``, the name the
      application's pushes carry.
    - A folder is imported as a package together with every module in it, recursively
      (``__main__`` modules excepted), so its job classes are all registered wherever
      they are defined.

    Returns:
        The imported modules: the one named, or the package and each of its modules.

    Raises:
        ConfigError: the module, file or folder cannot be found, or a module of a package
            folder fails to import (the message names it).
        RequireFailed: the named module or file raised when imported (a ConfigError whose
            ``__cause__`` is the exception).
    """
    path = Path(target)
    if target.endswith(".py") or path.is_dir():
        if not path.exists():
            raise ConfigError(f"-r {target}: no such file or folder")
        root, module_name = _importable(path.resolve())
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))
        module = _import(target, module_name)
        return _with_submodules(target, module) if path.is_dir() else [module]
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)  # as `python -m` does, so `-r myapp.jobs` finds ./myapp
    try:
        return [importlib.import_module(target)]
    except ModuleNotFoundError as exc:
        # Only the target itself (or a package on its path, e.g. a typo in
        # `myapp.jobz`) missing is said so; a found module that imports a missing
        # dependency fails like any other import error.
        missing = exc.name or ""
        if missing and (target == missing or target.startswith(missing + ".")):
            raise ConfigError(f"-r {target}: no module named {missing!r}") from None
        raise RequireFailed(target, exc) from exc
    except ConfigError:
        raise
    except Exception as exc:
        raise RequireFailed(target, exc) from exc


def _import(target: str, module_name: str) -> ModuleType:
    """Import the module of the file or folder ``target``; what it raises, as
    :class:`RequireFailed` (a :class:`ConfigError` it raises itself is kept)."""
    try:
        return importlib.import_module(module_name)
    except ConfigError:
        raise
    except Exception as exc:
        raise RequireFailed(target, exc) from exc


def require_all(targets: Iterable[str]) -> list[ModuleType]:
    """:func:`require` each ``-r`` target in order, warning in the log about a target that
    accounts for no job class (:func:`_accounts_for`: a package folder whose jobs live
    elsewhere, a module without jobs) and when no job class is registered at all: a
    worker that has none fails every job it fetches as unknown. A module that defines
    ``configure_worker`` (a setup module, e.g. ``rfetch.integrations.django.worker``) is
    not warned about.

    Returns:
        Every imported module, in order.

    Raises:
        As :func:`require`; DuplicateJobName: two classes claim one name.
    """
    modules: list[ModuleType] = []
    known = set(_all_subclasses(Job))
    for target in targets:
        imported = require(target)
        modules.extend(imported)
        loaded = set(_all_subclasses(Job))
        setup = any(hasattr(m, "configure_worker") for m in imported)
        if not setup and not Registry(_accounts_for(imported, loaded - known, loaded)):
            log.warning(
                "-r %s adds no job class (no concrete rfetch.Job subclass or @rfetch.job "
                "function is defined in it, imported into it or loaded by importing it); "
                "name the module that defines the jobs",
                target,
            )
        known = loaded
    if not Registry(known):
        log.warning(
            "no job classes are registered%s: every job this worker fetches will fail as "
            "unknown and go to the retry set",
            "" if modules else " (no -r given)",
        )
    return modules


def _accounts_for(
    modules: list[ModuleType], new: set[type[Job]], loaded: set[type[Job]]
) -> set[type[Job]]:
    """The job classes a ``-r`` target's ``modules`` account for: those its import loaded
    (``new``, wherever they are defined) and, of every class ``loaded``, those defined in
    one of the modules (or a package's submodule) or named in a module's namespace, for a
    module an earlier ``-r`` (or Django's app loading) had already imported."""
    names = {m.__name__ for m in modules}
    namespace = {id(v) for m in modules for v in vars(m).values()}
    return new | {
        cls for cls in loaded
        if cls.__module__ in names
        or any(cls.__module__.startswith(n + ".") for n in names)
        or id(cls) in namespace
    }


def _importable(path: Path) -> tuple[Path, str]:
    """The ``sys.path`` entry and dotted module name under which the file or folder
    ``path`` (absolute) is imported: up through every enclosing package folder."""
    if path.is_file() and path.stem == "__init__":  # a package's own file: the package
        path = path.parent
    parts = [path.stem if path.is_file() else path.name]
    folder = path.parent
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        parts.insert(0, folder.name)
        folder = folder.parent
    return folder, ".".join(parts)


def _with_submodules(target: str, package: ModuleType) -> list[ModuleType]:
    """``package`` and every module under it, imported in name order; ``__main__``
    modules (a package's command line) are skipped."""
    modules = [package]
    search = getattr(package, "__path__", None)
    if search is None:
        return modules

    def failed(name: str) -> None:
        raise ConfigError(f"-r {target}: importing {name} failed: {sys.exc_info()[1]!r}")

    found = pkgutil.walk_packages(search, prefix=f"{package.__name__}.", onerror=failed)
    for info in sorted(found, key=lambda i: i.name):
        if info.name.rsplit(".", 1)[-1] == "__main__":
            continue
        try:
            modules.append(importlib.import_module(info.name))
        except ConfigError:
            raise
        except Exception as exc:
            raise ConfigError(
                f"-r {target}: importing {info.name}, a module of the package folder, failed: "
                f"{exc!r}; fix it, or name the job modules with -r (e.g. -r {package.__name__}"
                ".jobs)"
            ) from exc
    return modules


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
