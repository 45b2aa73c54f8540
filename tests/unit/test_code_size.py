"""The package keeps the size bar, read from its syntax trees (no import, no Redis): no
module over 400 lines, no function or method over 60 (from its ``def`` line to its last,
decorators excluded), and no constructor of the worker's parts (``rfetch/worker/``) taking
more than 5 parameters besides ``self``.

``KNOWN_OVER`` lists today's offenders, each with its size then; an entry may not grow, and
an entry that no longer exceeds its limit fails the test until it is removed, so the list
only shrinks.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "rfetch"

MODULE_LINES = "module lines"
FUNCTION_LINES = "function lines"
INIT_PARAMETERS = "init parameters"

LIMITS = {MODULE_LINES: 400, FUNCTION_LINES: 60, INIT_PARAMETERS: 5}
"""The bar per measure: a module's lines, a function's lines, the parameters of an
``__init__`` of a class in ``rfetch/worker/`` besides ``self``."""

WORKER_DIR = "worker"
"""The folder (below ``rfetch/``) whose classes' constructors are held to
``INIT_PARAMETERS``."""

Key = tuple[str, str]
"""(measure, what): ``what`` is a module's path below ``rfetch/``, with ``:`` and the
qualified name of a function (``worker/launcher.py:Launcher.__init__``) or of a class
whose ``__init__`` is counted (``worker/heartbeat.py:Heartbeat``)."""

KNOWN_OVER: dict[Key, int] = {
}
"""Today's offenders and their sizes; see the module's docstring."""


def parameters_besides_self(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The parameters of a method, ``*args`` and ``**kwargs`` one each, less ``self``."""
    arguments = function.args
    named = len(arguments.posonlyargs) + len(arguments.args) + len(arguments.kwonlyargs)
    return named - 1 + (arguments.vararg is not None) + (arguments.kwarg is not None)


def measure_module(name: str, source: str) -> dict[Key, int]:
    """Every measure of one module: its lines, each function's lines (nested ones too), and
    in ``worker/`` the parameters of each class's ``__init__``.

    Args:
        name: the module's path below the package (``worker/fetch.py``), used in the keys.
        source: its text.

    Raises:
        SyntaxError: ``source`` does not parse.
    """
    sizes = {(MODULE_LINES, name): len(source.splitlines())}
    in_worker = name.startswith(f"{WORKER_DIR}/")

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                qualified = f"{prefix}{child.name}"
                assert child.end_lineno is not None
                # ``lineno`` is the ``def`` line: decorators are not counted.
                sizes[FUNCTION_LINES, f"{name}:{qualified}"] = child.end_lineno - child.lineno + 1
                visit(child, f"{qualified}.")
            elif isinstance(child, ast.ClassDef):
                qualified = f"{prefix}{child.name}"
                for item in child.body if in_worker else []:
                    if (
                        isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                        and item.name == "__init__"
                    ):
                        sizes[INIT_PARAMETERS, f"{name}:{qualified}"] = (
                            parameters_besides_self(item)
                        )
                visit(child, f"{qualified}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source, filename=name), "")
    return sizes


def measure(package: Path) -> dict[Key, int]:
    """Every measure of every module below ``package`` (see :func:`measure_module`)."""
    sizes: dict[Key, int] = {}
    for path in sorted(package.rglob("*.py")):
        name = path.relative_to(package).as_posix()
        sizes.update(measure_module(name, path.read_text(encoding="utf-8")))
    return sizes


def over_limits(sizes: dict[Key, int]) -> dict[Key, int]:
    return {key: size for key, size in sizes.items() if size > LIMITS[key[0]]}


def describe(found: dict[Key, int]) -> str:
    return "\n".join(
        f"  {what}: {size} {measure} (limit {LIMITS[measure]})"
        for (measure, what), size in sorted(found.items())
    )


def test_nothing_new_exceeds_the_limits_and_no_known_offender_grows() -> None:
    over = over_limits(measure(PACKAGE))
    new = {key: size for key, size in over.items() if key not in KNOWN_OVER}
    grown = {key: size for key, size in over.items() if size > KNOWN_OVER.get(key, size)}
    assert new == {}, f"over the size bar (split them):\n{describe(new)}"
    assert grown == {}, f"grown past their KNOWN_OVER size:\n{describe(grown)}"


def test_every_known_offender_still_exceeds_its_limit() -> None:
    over = over_limits(measure(PACKAGE))
    fixed = sorted(f"{measure}: {what}" for measure, what in KNOWN_OVER.keys() - over.keys())
    assert fixed == [], f"within the bar now: remove from KNOWN_OVER: {fixed}"


SAMPLE = '''
import functools


@functools.cache
@functools.wraps(print)
def decorated():
    return 1


class Part:
    def __init__(self, a, b, *more, c, **options):
        def inner():
            pass

    async def run(self):
        pass
'''


def test_the_measures_of_a_sample_module() -> None:
    sizes = measure_module("worker/part.py", SAMPLE)

    assert sizes == {
        (MODULE_LINES, "worker/part.py"): 17,
        (FUNCTION_LINES, "worker/part.py:decorated"): 2,  # not its two decorator lines
        (FUNCTION_LINES, "worker/part.py:Part.__init__"): 3,
        (FUNCTION_LINES, "worker/part.py:Part.__init__.inner"): 2,
        (FUNCTION_LINES, "worker/part.py:Part.run"): 2,
        (INIT_PARAMETERS, "worker/part.py:Part"): 5,  # a, b, *more, c, **options
    }


def test_constructors_are_counted_in_the_worker_folder_only() -> None:
    sizes = measure_module("store/part.py", SAMPLE)

    assert (INIT_PARAMETERS, "store/part.py:Part") not in sizes


@pytest.mark.parametrize(
    ("source", "key"),
    [
        ("x = 1\n" * 401, (MODULE_LINES, "worker/big.py")),
        ("def f():\n" + "    pass\n" * 60, (FUNCTION_LINES, "worker/big.py:f")),
        (
            "class C:\n    def __init__(self, a, b, c, d, e, f):\n        pass\n",
            (INIT_PARAMETERS, "worker/big.py:C"),
        ),
    ],
    ids=["module", "function", "init"],
)
def test_one_past_a_limit_is_over_it(source: str, key: Key) -> None:
    over = over_limits(measure_module("worker/big.py", source))

    assert over == {key: LIMITS[key[0]] + 1}


def test_at_the_limits_nothing_is_over() -> None:
    at_limits = (
        "def f():\n" + "    pass\n" * 59
        + "class C:\n    def __init__(self, a, b, c, d, e):\n        pass\n"
    )
    at_limits += "\n" * (400 - len(at_limits.splitlines()))

    assert over_limits(measure_module("worker/edge.py", at_limits)) == {}
