"""``accelboard team create|list`` and ``accelboard user create``: teams and accounts without the
Django shell; passwords from a prompt or a file, never from the command line."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from accelboard.core.models import Membership, Team
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_it_creates_and_lists_teams() -> None:
    out, _ = _run("team", "create", "Inference Platform", "--slug", "inference")
    assert out.strip() == "inference"
    assert _run("team", "create", "Research")[0].strip() == "research"
    listing = _run("team", "list")[0].splitlines()
    assert [line.split()[0] for line in listing] == ["inference", "research"]
    assert "0 members  Inference Platform" in listing[0]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["Inference Platform", "--slug", "other"], "named 'Inference Platform' exists"),
        (["Other", "--slug", "inference"], "slug 'inference' exists"),
        (["Other", "--slug", "Bad Slug"], "lower-case"),
    ],
)
def test_it_refuses_a_taken_or_bad_team(args: list[str], words: str) -> None:
    _run("team", "create", "Inference Platform", "--slug", "inference")
    with pytest.raises(CommandError, match=words):
        _run("team", "create", *args)
    assert Team.objects.count() == 1


def test_it_creates_a_user_in_a_team_with_the_password_from_a_file(tmp_path: Path) -> None:
    _run("team", "create", "Inference Platform", "--slug", "inference")
    secret = tmp_path / "password"
    secret.write_text(PASSWORD + "\n")
    _run("user", "create", "ada", "--team", "inference", "--role", "engineer", "--password-file", str(secret),
         "--email", "ada@example.com")  # fmt: skip
    user = get_user_model().objects.get(username="ada")
    assert user.check_password(PASSWORD) and user.email == "ada@example.com" and not user.is_staff
    assert Membership.objects.get(user=user).role == "engineer"
    assert "1 members" in _run("team", "list")[0]


def test_it_reads_the_password_from_standard_input(monkeypatch: pytest.MonkeyPatch) -> None:
    _run("team", "create", "Finance", "--slug", "finance")
    monkeypatch.setattr(sys, "stdin", io.StringIO(PASSWORD + "\n"))
    _run("user", "create", "bob", "--team", "finance", "--role", "finance", "--password-file", "-")
    assert get_user_model().objects.get(username="bob").check_password(PASSWORD)


def test_it_asks_twice_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    _run("team", "create", "Research", "--slug", "research")
    answers = iter([PASSWORD, PASSWORD])
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    monkeypatch.setattr("getpass.getpass", lambda prompt="": next(answers))
    _run("user", "create", "cy", "--team", "research", "--role", "lead")
    assert Membership.objects.get(user__username="cy").role == "lead"


@pytest.mark.parametrize(
    ("args", "password", "words"),
    [
        (["--team", "nope", "--role", "lead"], PASSWORD, "unknown team 'nope'"),
        (["--team", "inference", "--role", "lead"], "short", "too short"),
        (["--team", "inference", "--role", "lead"], "password123", "too common"),
        (["--team", "inference", "--role", "lead"], "", "first line is empty"),
    ],
)
def test_it_refuses_a_bad_user_and_creates_nothing(
    tmp_path: Path, args: list[str], password: str, words: str
) -> None:
    _run("team", "create", "Inference Platform", "--slug", "inference")
    secret = tmp_path / "password"
    secret.write_text(password + "\n")
    with pytest.raises(CommandError, match=words):
        _run("user", "create", "dee", *args, "--password-file", str(secret))
    assert not get_user_model().objects.filter(username="dee").exists()


def test_it_refuses_a_password_on_the_command_line_and_without_a_terminal(db: None) -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "accelboard.settings"}
    command = [
        sys.executable,
        "-m",
        "accelboard.cli",
        "user",
        "create",
        "eve",
        "--team",
        "x",
        "--role",
        "lead",
    ]
    result = subprocess.run([*command, "--password", PASSWORD], cwd=ROOT, env=env, capture_output=True,
                            text=True, stdin=subprocess.DEVNULL)  # fmt: skip
    assert result.returncode != 0 and "unrecognized arguments: --password" in result.stderr
