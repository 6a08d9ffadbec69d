"""Bad configuration stops ``accelboard`` with one line naming the variable, never a traceback.

Each case runs ``python -m accelboard.cli check`` in a fresh process, because settings are read
once at import: the only honest way to test them is to start the program as an operator would.
The database is never contacted by ``check``, so a well-formed URL to nowhere is enough.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Everything settings read that the test runner's own environment might carry.
_CONFIG_VARS = (
    "ACCELBOARD_PRODUCTION",
    "DEBUG",
    "SECRET_KEY",
    "SECRET_KEY_FILE",
    "DATABASE_URL",
    "DATABASE_URL_FILE",
    "CELERY_BROKER_URL",
    "CELERY_BROKER_URL_FILE",
    "CELERY_RESULT_BACKEND",
    "ALLOWED_HOSTS",
    "EMAIL_BACKEND",
    "EMAIL_HOST",
    "EMAIL_HOST_USER",
    "TELEMETRY_RETENTION_DAYS",
)
NOWHERE_DB = "postgresql://accelboard@127.0.0.1:1/accelboard"
GOOD_SECRET = "k" * 64


def run_check(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {key: value for key, value in os.environ.items() if key not in _CONFIG_VARS}
    # A private ACCELBOARD_HOME: the development secret key is written there, not in the checkout.
    base["ACCELBOARD_HOME"] = str(tmp_path / "home")
    base["DJANGO_SETTINGS_MODULE"] = "accelboard.settings"
    base.update(env)
    return subprocess.run(
        [sys.executable, "-m", "accelboard.cli", *(args or ["check"])],
        cwd=ROOT,
        env=base,
        capture_output=True,
        text=True,
        timeout=120,
    )


def assert_config_error(result: subprocess.CompletedProcess[str], variable: str) -> str:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line, got:\n{result.stderr}"
    assert lines[0].startswith("accelboard: configuration error: ")
    assert variable in lines[0]
    assert "Traceback" not in result.stderr
    return lines[0]


def test_it_passes_a_good_development_configuration(tmp_path: Path) -> None:
    result = run_check(tmp_path, DATABASE_URL=NOWHERE_DB, CELERY_BROKER_URL="redis://127.0.0.1:6379/0")
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout
    # The development key was generated under ACCELBOARD_HOME, readable by its owner only.
    key = tmp_path / "home" / "secret_key"
    assert len(key.read_text()) >= 50
    assert key.stat().st_mode & 0o077 == 0


def test_it_passes_a_good_production_configuration(tmp_path: Path) -> None:
    result = run_check(
        tmp_path,
        ACCELBOARD_PRODUCTION="1",
        SECRET_KEY=GOOD_SECRET,
        DATABASE_URL=NOWHERE_DB,
        CELERY_BROKER_URL="redis://redis:6379/0",
        ALLOWED_HOSTS="accelboard.example.com",
        EMAIL_HOST="smtp.example.com",
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("postgresql://u@h:notaport/db", "is malformed"),
        ("mysql://u:p@h:3306/db", "has scheme 'mysql'"),
        ("postgresql://u@h:5432/", "names no database"),
    ],
)
def test_it_rejects_a_malformed_database_url(tmp_path: Path, url: str, fragment: str) -> None:
    line = assert_config_error(run_check(tmp_path, DATABASE_URL=url), "DATABASE_URL")
    assert fragment in line


def test_it_rejects_an_empty_database_url(tmp_path: Path) -> None:
    line = assert_config_error(run_check(tmp_path, DATABASE_URL=""), "DATABASE_URL")
    assert "set but empty" in line


def test_it_requires_a_secret_key_in_production(tmp_path: Path) -> None:
    result = run_check(
        tmp_path,
        ACCELBOARD_PRODUCTION="1",
        DATABASE_URL=NOWHERE_DB,
        CELERY_BROKER_URL="redis://redis:6379/0",
        ALLOWED_HOSTS="accelboard.example.com",
    )
    line = assert_config_error(result, "SECRET_KEY")
    assert "ACCELBOARD_PRODUCTION=1" in line
    # Production never falls back to a generated key.
    assert not (tmp_path / "home" / "secret_key").exists()


def test_it_rejects_a_short_secret_key_in_production(tmp_path: Path) -> None:
    result = run_check(
        tmp_path,
        ACCELBOARD_PRODUCTION="1",
        SECRET_KEY="short",
        DATABASE_URL=NOWHERE_DB,
        CELERY_BROKER_URL="redis://redis:6379/0",
        ALLOWED_HOSTS="accelboard.example.com",
    )
    assert "at least 50 characters" in assert_config_error(result, "SECRET_KEY")


def test_it_requires_a_database_url_in_production(tmp_path: Path) -> None:
    result = run_check(
        tmp_path,
        ACCELBOARD_PRODUCTION="1",
        SECRET_KEY=GOOD_SECRET,
        CELERY_BROKER_URL="redis://redis:6379/0",
        ALLOWED_HOSTS="accelboard.example.com",
    )
    assert_config_error(result, "DATABASE_URL")
    # It must fail before starting the embedded server: no data directory was made.
    assert not (tmp_path / "home" / "pgdata").exists()


def test_it_requires_allowed_hosts_in_production(tmp_path: Path) -> None:
    result = run_check(
        tmp_path,
        ACCELBOARD_PRODUCTION="1",
        SECRET_KEY=GOOD_SECRET,
        DATABASE_URL=NOWHERE_DB,
        CELERY_BROKER_URL="redis://redis:6379/0",
    )
    assert_config_error(result, "ALLOWED_HOSTS")


def test_it_requires_a_broker_in_production(tmp_path: Path) -> None:
    result = run_check(
        tmp_path,
        ACCELBOARD_PRODUCTION="1",
        SECRET_KEY=GOOD_SECRET,
        DATABASE_URL=NOWHERE_DB,
        ALLOWED_HOSTS="accelboard.example.com",
    )
    assert_config_error(result, "CELERY_BROKER_URL")


def test_it_rejects_a_debug_value_it_cannot_read(tmp_path: Path) -> None:
    line = assert_config_error(run_check(tmp_path, DATABASE_URL=NOWHERE_DB, DEBUG="maybe"), "DEBUG")
    assert "'maybe'" in line


def test_it_rejects_a_production_flag_it_cannot_read(tmp_path: Path) -> None:
    result = run_check(tmp_path, DATABASE_URL=NOWHERE_DB, ACCELBOARD_PRODUCTION="prod")
    assert_config_error(result, "ACCELBOARD_PRODUCTION")


def test_it_rejects_a_secret_key_file_pointing_nowhere(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-secret"
    line = assert_config_error(
        run_check(tmp_path, DATABASE_URL=NOWHERE_DB, SECRET_KEY_FILE=str(missing)), "SECRET_KEY_FILE"
    )
    assert str(missing) in line


def test_it_reads_the_database_url_from_a_file(tmp_path: Path) -> None:
    url_file = tmp_path / "db-url"
    url_file.write_text("mysql://u@h/db\n")
    # The file's content is parsed like the variable, and the error names the variable it feeds.
    line = assert_config_error(run_check(tmp_path, DATABASE_URL_FILE=str(url_file)), "DATABASE_URL")
    assert "'mysql'" in line


def test_it_rejects_a_non_integer_setting(tmp_path: Path) -> None:
    result = run_check(tmp_path, DATABASE_URL=NOWHERE_DB, TELEMETRY_RETENTION_DAYS="a month")
    assert_config_error(result, "TELEMETRY_RETENTION_DAYS")


def test_it_rejects_a_route_timeout_out_of_range(tmp_path: Path) -> None:
    line = assert_config_error(
        run_check(tmp_path, DATABASE_URL=NOWHERE_DB, ROUTE_TIMEOUT_S="0"), "ROUTE_TIMEOUT_S"
    )
    assert "above 0" in line


def test_it_flags_an_unsupported_broker_with_a_check_id(tmp_path: Path) -> None:
    result = run_check(tmp_path, DATABASE_URL=NOWHERE_DB, CELERY_BROKER_URL="ftp://x")
    assert result.returncode == 1
    assert "(accelboard.E001) CELERY_BROKER_URL ftp:// is not a supported broker" in result.stderr
    assert "HINT:" in result.stderr


def test_it_flags_short_retention_with_a_check_id(tmp_path: Path) -> None:
    result = run_check(tmp_path, DATABASE_URL=NOWHERE_DB, TELEMETRY_RETENTION_DAYS="1")
    assert result.returncode == 1
    assert "(accelboard.E003)" in result.stderr


def test_it_flags_production_without_an_email_host(tmp_path: Path) -> None:
    result = run_check(
        tmp_path,
        ACCELBOARD_PRODUCTION="1",
        SECRET_KEY=GOOD_SECRET,
        DATABASE_URL=NOWHERE_DB,
        CELERY_BROKER_URL="redis://redis:6379/0",
        ALLOWED_HOSTS="accelboard.example.com",
    )
    assert result.returncode == 1
    assert "(accelboard.E002) EMAIL_HOST is not set" in result.stderr


def test_it_says_what_an_email_host_on_this_machine_means(tmp_path: Path) -> None:
    result = run_check(
        tmp_path,
        ACCELBOARD_PRODUCTION="1",
        SECRET_KEY=GOOD_SECRET,
        DATABASE_URL=NOWHERE_DB,
        CELERY_BROKER_URL="redis://redis:6379/0",
        ALLOWED_HOSTS="accelboard.example.com",
        EMAIL_HOST="localhost",
    )
    assert "EMAIL_HOST is not set" not in result.stderr
    assert (
        "(accelboard.W002) EMAIL_HOST is localhost: alert emails go to an SMTP server on this machine, port 25"
        in result.stderr
    )
    assert "(accelboard.E002)" not in result.stderr


def test_it_warns_about_debug_with_a_public_host(tmp_path: Path) -> None:
    result = run_check(tmp_path, DATABASE_URL=NOWHERE_DB, ALLOWED_HOSTS="accelboard.example.com", DEBUG="1")
    # A warning does not fail the check, but it is printed with its id.
    assert result.returncode == 0
    assert "(accelboard.W001)" in result.stderr
    assert "accelboard.example.com" in result.stderr


def _missing_database_url() -> str:
    """A database that does not exist, on the server the tests use (the machine's by default)."""
    parts = urlsplit(os.environ.get("DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/postgres")
    return urlunsplit(parts._replace(path="/accelboard_no_such_database"))


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        (_missing_database_url(), 'database "accelboard_no_such_database" does not exist'),
        (NOWHERE_DB, "port 1 failed"),
    ],
    ids=["missing-database", "no-server"],
)
def test_it_names_database_url_when_the_database_cannot_be_reached(
    tmp_path: Path, url: str, reason: str
) -> None:
    # `check` never connects; `migrate` does, as the first command of a new deployment.
    result = run_check(tmp_path, "migrate", "--no-input", DATABASE_URL=url)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line, got:\n{result.stderr}"
    assert lines[0].startswith("accelboard: cannot connect to the database of DATABASE_URL: ")
    assert reason in lines[0]
