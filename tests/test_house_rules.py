"""The house rules of ARCHITECTURE.md that import-linter cannot check alone (no database).

1. Every module of accelboard that imports neither Django, Celery nor psycopg, even indirectly,
   is listed in the ``pure`` import contract, so the contract keeps it pure from then on.
2. Only services write rows: no ORM write (``save``, ``create``, ``update``, ``delete`` and the
   bulk ones on a queryset) and no INSERT/UPDATE/DELETE/COPY/TRUNCATE SQL outside a
   ``*services.py`` module, but for the few places WRITES_ALLOWED names, each with why.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "accelboard"
FORBIDDEN = ("django", "celery", "psycopg")

# Modules that import none of FORBIDDEN yet are not computation the contract should guard.
NOT_COMPUTATION = {
    "accelboard.env": "the settings' environment helpers (the frame, read before Django starts)",
    "accelboard.benchmarks.metrics": "a re-export for the demo, removed when the demo imports the real modules",
    "accelboard.core.demo_runner": "starts the demo's processes; moves under accelboard/demo/",
    "accelboard.broker": "the embedded broker's kombu channel (the frame, like accelboard.celery)",
}
# Packages outside the rule: the demo sits beside the layers (its own contract, demo-beside) and
# accelboard.testing is the test suite's support.
OUTSIDE = ("accelboard.demo", "accelboard.testing")


def _contract(contract_id: str) -> dict:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return next(c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == contract_id)


def _holds_code(module: str) -> bool:
    """False for a module that is only a docstring and imports (an empty package's __init__)."""
    path = PACKAGE.joinpath(*module.split(".")[1:])
    file = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    body = ast.parse(file.read_text()).body
    return any(
        not isinstance(node, ast.Import | ast.ImportFrom)
        and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
        for node in body
    )


def _within(module: str, packages: tuple[str, ...] | list[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("accelboard", include_external_packages=True, cache_dir=None)


def test_it_lists_every_pure_module_in_the_pure_contract(graph: grimp.ImportGraph) -> None:
    listed = _contract("pure")["source_modules"]
    assert set(_contract("pure")["forbidden_modules"]) == set(FORBIDDEN)
    missing = []
    for module in sorted(graph.modules):
        if (
            not module.startswith("accelboard.")
            or ".migrations" in module
            or _within(module, OUTSIDE)
            or module in NOT_COMPUTATION
            or _within(module, listed)
            or not _holds_code(module)
        ):
            continue
        imported = graph.find_upstream_modules(module) | graph.find_modules_directly_imported_by(module)
        if not any(name.split(".")[0] in FORBIDDEN for name in imported):
            missing.append(module)
    assert not missing, (
        f"pure modules missing from the `pure` contract in pyproject.toml: {missing}; list them "
        "there (or, if a module is not computation, in NOT_COMPUTATION here with why)"
    )


def test_it_lists_only_modules_that_exist(graph: grimp.ImportGraph) -> None:
    stale = [m for m in _contract("pure")["source_modules"] if m not in graph.modules]
    assert not stale, f"the `pure` contract names modules that do not exist: {stale}"


# --- only services write rows -------------------------------------------------------------------

WRITE_METHODS = {
    "save",
    "delete",
    "create",
    "update",
    "bulk_create",
    "bulk_update",
    "get_or_create",
    "update_or_create",
}
# A call of one of these on a chain naming one of QUERYSET is a write to rows.
QUERYSET = {"objects", "filter", "exclude", "all", "select_for_update", "select_related", "order_by"}
WRITE_SQL = re.compile(
    r"^\s*(INSERT|UPDATE|DELETE|TRUNCATE|COPY|MERGE)\b|\bINSERT INTO\b|\bDELETE FROM\b|\bUPDATE\s+\w+\s+SET\b"
)
# (module path, what) -> why it may write there.
WRITES_ALLOWED = {
    ("accelboard/benchmarks/admin.py", ".save() on formset"): "the admin site saves its own inline forms",
    ("accelboard/benchmarks/admin.py", ".save() on alias"): "the admin site saves its own inline forms",
    ("accelboard/benchmarks/admin.py", ".delete() on removed"): "the admin site saves its own inline forms",
    ("accelboard/costs/exports.py", ".save() on workbook"): "an openpyxl workbook written to bytes, no row",
    (
        "accelboard/fleet/partials.py",
        "SQL",
    ): "statements fleet's services execute (partials is pure: it runs none)",
    ("accelboard/broker.py", "SQL"): "kombu's own message table (the broker), no product row",
}
# The demo sits beside the layers and bulk-loads a fixed fleet; accelboard.testing is the suite's.
WRITES_OUTSIDE = ("accelboard/demo/", "accelboard/testing/", "/migrations/")


def _receiver(node: ast.expr) -> list[str]:
    """``Model.objects.filter(...)`` -> ["Model", "objects", "filter"]."""
    names: list[str] = []
    while True:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Attribute):
            names.append(node.attr)
            node = node.value
        else:
            if isinstance(node, ast.Name):
                names.append(node.id)
            return names[::-1]


def _writes(tree: ast.Module) -> list[str]:
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in WRITE_METHODS
        ):
            receiver = _receiver(node.func.value)
            # dict.update and set.update are no writes; an instance's save() and delete() are.
            if node.func.attr in ("save", "delete") or "_" in node.func.attr or set(receiver) & QUERYSET:
                found.append(f".{node.func.attr}() on {'.'.join(receiver)}")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
            and WRITE_SQL.search(node.value)
        ):
            found.append("SQL")
    return found


def test_it_writes_rows_only_in_services() -> None:
    outside = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        if name.endswith("services.py") or any(part in name for part in WRITES_OUTSIDE):
            continue
        outside += [
            f"{name}: {what}"
            for what in _writes(ast.parse(path.read_text()))
            if (name, what) not in WRITES_ALLOWED
        ]
    assert not outside, f"rows written outside a services module (move the write into one): {outside}"


def test_every_allowed_write_is_still_there() -> None:
    """An allowance whose write has gone is dropped, so the list names only what is true."""
    stale = [
        (name, what)
        for name, what in WRITES_ALLOWED
        if what not in _writes(ast.parse((ROOT / name).read_text()))
    ]
    assert not stale, f"WRITES_ALLOWED names writes that no longer exist: {stale}"


def test_it_finds_the_writes_it_looks_for() -> None:
    code = """
Run.objects.filter(pk=1).update(state="x")
run.save()
Run.objects.bulk_create(rows)
context.update(done=True)
cursor.execute("INSERT INTO t VALUES (1)")
cursor.execute("SELECT 1")
"""
    assert _writes(ast.parse(code)) == [
        ".update() on Run.objects.filter",
        ".save() on run",
        ".bulk_create() on Run.objects",
        "SQL",
    ]
