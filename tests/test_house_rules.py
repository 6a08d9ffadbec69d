"""The house rules of ARCHITECTURE.md that import-linter cannot check alone (no database).

1. Every module of accelboard that imports neither Django, Celery nor psycopg, even indirectly,
   is listed in the ``pure`` import contract, so the contract keeps it pure from then on.
"""

from __future__ import annotations

import ast
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
