"""The package's imports point one way: no module imports rfetch inside a function (an
import hidden there is how a cycle is kept out of sight), and the module-level imports,
read from the source (no Redis, nothing imported), form no cycle, counting the package
``__init__`` that importing a submodule runs first. ``if TYPE_CHECKING:`` imports are
types only and are left out."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "rfetch"

OPTIONAL = {
    ("cli/web.py", "web"): "the web UI needs the web extra (jinja2, werkzeug); the CLI "
    "says so when it is missing",
    ("cli/web.py", "_require_web_extra"): "checks that the web extra imports, to say so "
    "when it is missing",
    ("cli/web.py", "_host_port"): "as web: rfetch.web.server needs the web extra",
    ("cli/web.py", "_credentials"): "as web: rfetch.web needs the web extra",
    ("cli/worker_launch.py", "launch"): "--metrics-port's gauges need prometheus-client (web "
    "extra); the CLI loads without it",
    ("cli/worker_launch.py", "_run_shards"): "as launch",
    ("cli/worker_launch.py", "_worker_metrics"): "--metrics-port needs prometheus-client "
    "(web extra); the CLI says so when it is missing",
    ("web/views/system.py", "metrics"): "/metrics needs prometheus-client, which the unit "
    "tier's web UI does not install",
    ("integrations/django/__init__.py", "__getattr__"): "RfetchBackend needs Django's task "
    "framework (django.tasks or the django-tasks package), optional",
    ("integrations/django/apps.py", "web_app"): "the mounted web UI needs the web extra, "
    "optional for a Django project",
    ("integrations/django/worker.py", "_tasks_available"): "probes for Django's task "
    "framework (optional): ImportError means absent",
    ("integrations/django/worker.py", "_add_task_runner"): "the task runner needs Django's "
    "task framework, only when the probe found it",
    ("integrations/sentry/__init__.py", "__getattr__"): "RfetchIntegration: its module "
    "imports sentry-sdk (the sentry extra); rfetch.integrations.sentry loads without it",
    ("integrations/sentry/__init__.py", "install"): "as __getattr__: sentry-sdk is optional",
    ("integrations/sentry/__init__.py", "_client"): "as __getattr__: sentry-sdk is optional",
    ("integrations/sentry/__init__.py", "_add_parts"): "the tracing module imports "
    "sentry-sdk (optional)",
}
"""Function-level imports kept on purpose: each loads an optional extra's module at first
use (never to break a cycle), keyed by (file below ``rfetch/``, function)."""


def sources() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text("utf-8"))


def module_name(relative: str) -> str:
    parts = ["rfetch", *relative.removesuffix(".py").split("/")]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The rfetch modules an import statement names (a ``from`` import's names too, in
    case they are submodules)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        anchor = module.split(".")
        anchor = anchor if is_package else anchor[:-1]
        anchor = anchor[: len(anchor) - node.level + 1]
        base = ".".join([*anchor, base] if base else anchor)
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def walk(node: ast.AST, function: str | None) -> Iterator[tuple[ast.AST, str | None]]:
    """Every node with the name of the outermost function it is in, skipping
    ``if TYPE_CHECKING:`` blocks."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            continue
        yield child, function
        inner = function
        if function is None and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inner = child.name
        yield from walk(child, inner)


def imports() -> Iterator[tuple[str, str, str | None]]:
    """(file, imported rfetch module, function or None) for every import of rfetch."""
    for relative, tree in sources():
        module = module_name(relative)
        is_package = relative.endswith("__init__.py")
        for node, function in walk(tree, None):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in targets(node, module, is_package):
                    if target == "rfetch" or target.startswith("rfetch."):
                        yield relative, target, function


def test_no_rfetch_import_inside_a_function() -> None:
    found = {(relative, function) for relative, _, function in imports() if function}
    unexplained = sorted(found - OPTIONAL.keys())
    assert unexplained == [], f"rfetch imported inside a function: {unexplained}"
    stale = sorted(OPTIONAL.keys() - found)
    assert stale == [], f"allow-list entries with no such import: {stale}"


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules its top-level imports run: the target, and every package
    ``__init__`` above it that is not also above the importer (those run first anyway)."""
    known = {module_name(relative) for relative, _ in sources()}
    graph: dict[str, set[str]] = {name: set() for name in known}
    for relative, target, function in imports():
        if function is not None:
            continue
        importer = module_name(relative)
        parts = target.split(".")
        for end in range(2, len(parts) + 1):
            name = ".".join(parts[:end])
            if name in known and name != importer and not importer.startswith(name + "."):
                graph[importer].add(name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_module_level_imports_form_no_cycle() -> None:
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_cycle_through_a_package_init() -> None:
    graph = {"rfetch.a": {"rfetch.b"}, "rfetch.b": {"rfetch.c"}, "rfetch.c": {"rfetch.a"}}
    assert cycles(graph) == [["rfetch.a", "rfetch.b", "rfetch.c"]]
    assert cycles({"rfetch.a": {"rfetch.b"}, "rfetch.b": set()}) == []


def test_config_imports_only_leaf_modules() -> None:
    """Config is read by every component: it imports the errors and its own checks, never
    a feature (features check their settings, or are given the Config)."""
    graph = import_graph()
    seen: set[str] = set()
    todo = ["rfetch.config"]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(graph[name])
    features = sorted(name for name in seen if name.split(".")[1] in FEATURES)
    assert features == []


FEATURES = {"worker", "swarm", "periodic", "batch", "workflow", "limiter", "durable",
            "outbox", "api", "cli", "web", "integrations", "testing", "push"}
"""Packages below ``rfetch`` that config must not load, even indirectly."""
