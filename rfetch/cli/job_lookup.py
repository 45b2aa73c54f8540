"""Which job class a name given to ``rfetch enqueue`` is: imported from its module path as
the worker's ``-r`` would, so a misspelt name is an error at the prompt rather than an
``UnknownJob`` in the retry set later."""

from __future__ import annotations

import difflib
import importlib
import sys
from pathlib import Path
from types import ModuleType

from rfetch.errors import ConfigError
from rfetch.jobs.job import Job
from rfetch.jobs.job_function import JobFunction

EXTERNAL_HINT = (
    "a job only another process runs (a Ruby worker, a class with its own name = ...): "
    "--external"
)


def find_job(name: str) -> type[Job]:
    """The job class registered as ``name`` (``module.QualName``), imported from the
    current folder as ``rfetch worker -r`` imports it.

    Raises:
        ConfigError: no module on the name's path can be imported, the module has no
            such attribute (the message suggests close names of the module's jobs), or
            the attribute is not a job class or ``@rfetch.job`` function, or importing
            the module raised (the message names the exception).
    """
    parts = name.split(".")
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)  # as `rfetch worker -r myapp.jobs` does
    for split in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:split])
        module = _import(module_name)
        if module is not None:
            return _attribute(name, module, parts[split:])
    raise ConfigError(f"{name!r} names no importable module.QualName; for {EXTERNAL_HINT}")


def _import(module_name: str) -> ModuleType | None:
    """The module, or None when it (or a package on its path) does not exist.

    Raises:
        ConfigError: importing it raised (a Django model module before ``django.setup()``,
            a missing dependency): the message names the module and the exception.
    """
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (module_name == missing or module_name.startswith(missing + ".")):
            return None
        raise _import_failed(module_name, exc) from exc
    except ConfigError:
        raise
    except Exception as exc:
        raise _import_failed(module_name, exc) from exc


def _import_failed(module_name: str, exc: Exception) -> ConfigError:
    return ConfigError(
        f"importing {module_name} to check the job name raised {type(exc).__name__}: {exc}; "
        "fix it, or push the name unchecked with --external"
    )


def _attribute(name: str, module: ModuleType, path: list[str]) -> type[Job]:
    value: object = module
    for part in path:
        value = getattr(value, part, None)
        if value is None:
            jobs = _job_names(module)
            close = difflib.get_close_matches(".".join(path), jobs, n=3, cutoff=0.6)
            hint = (
                f"; did you mean {' or '.join(f'{module.__name__}.{c}' for c in close)}?"
                if close else f"; for {EXTERNAL_HINT}"
            )
            raise ConfigError(f"{module.__name__} has no job {'.'.join(path)}{hint}")
    if isinstance(value, JobFunction):
        value = value.job_class
    if not (isinstance(value, type) and issubclass(value, Job)):
        raise ConfigError(f"{name} is not a job class (an rfetch.Job subclass or @rfetch.job "
                          "function)")
    if value.job_name() != name:
        raise ConfigError(f"{name} is pushed as {value.job_name()!r} (its name attribute)")
    return value


def _job_names(module: ModuleType) -> list[str]:
    """The attribute names of the job classes (and job functions) of a module."""
    return [
        attr for attr, value in vars(module).items()
        if isinstance(value, JobFunction)
        or (isinstance(value, type) and issubclass(value, Job) and value is not Job)
    ]
