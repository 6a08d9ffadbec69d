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
    "SITE_URL",
    "DEFAULT_FROM_EMAIL",
)
NOWHERE_DB = "postgresql://accelboard@127.0.0.1:1/accelboard"
GOOD_SECRET = "k" * 64


def run_check(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    # The browser tests' DJANGO_ALLOW_ASYNC_UNSAFE (set in this process when they share a worker)
    # is a test-process setting, never a deployment's: Django's deploy check errs on it.
    base = {
        key: value
        for key, value in os.environ.items()
        if key not in _CONFIG_VARS and key != "DJANGO_ALLOW_ASYNC_UNSAFE"
    }
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


def assert_check_errors(result: subprocess.CompletedProcess[str], *expected: str) -> None:
    """`check` ran to the end and reported each of ``expected`` (an id and its words)."""
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "SystemCheckError" in result.stderr
    for text in expected:
        assert text in result.stderr, f"{text!r} missing from:\n{result.stderr}"


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
    assert_check_errors(result, "(accelboard.E007) SECRET_KEY must be set when ACCELBOARD_PRODUCTION=1")
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
    assert_check_errors(
        result, "(accelboard.E007) SECRET_KEY must be at least 50 characters long in production (it has 5)"
    )


def test_it_requires_a_database_url_in_production(tmp_path: Path) -> None:
    result = run_check(
        tmp_path,
        ACCELBOARD_PRODUCTION="1",
        SECRET_KEY=GOOD_SECRET,
        CELERY_BROKER_URL="redis://redis:6379/0",
        ALLOWED_HOSTS="accelboard.example.com",
    )
    assert_check_errors(result, "(accelboard.E010) DATABASE_URL must be set when ACCELBOARD_PRODUCTION=1")
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
    assert_check_errors(result, "(accelboard.E008) ALLOWED_HOSTS must be set when ACCELBOARD_PRODUCTION=1")


def test_it_requires_a_broker_in_production(tmp_path: Path) -> None:
    result = run_check(
        tmp_path,
        ACCELBOARD_PRODUCTION="1",
        SECRET_KEY=GOOD_SECRET,
        DATABASE_URL=NOWHERE_DB,
        ALLOWED_HOSTS="accelboard.example.com",
    )
    assert_check_errors(
        result, "(accelboard.E010) CELERY_BROKER_URL must be set when ACCELBOARD_PRODUCTION=1"
    )


UNSAFE_PRODUCTION = {
    "ACCELBOARD_PRODUCTION": "1",
    "SECRET_KEY": "short",
    "DEBUG": "1",
    "ALLOWED_HOSTS": "*",
    "SITE_URL": "http://127.1:8000",
    "DATABASE_URL": NOWHERE_DB,
    "CELERY_BROKER_URL": "redis://redis:6379/0",
    "EMAIL_HOST": "smtp.example.com",
    "DEFAULT_FROM_EMAIL": "accelboard <alerts@example.com>",
}


def test_the_deploy_check_reports_every_unsafe_production_value_at_once(tmp_path: Path) -> None:
    result = run_check(tmp_path, "check", "--deploy", **UNSAFE_PRODUCTION)
    assert_check_errors(
        result,
        "(accelboard.E007) SECRET_KEY must be at least 50 characters long in production (it has 5)",
        "(accelboard.E008) ALLOWED_HOSTS contains '*' in production",
        "(accelboard.E009) DEBUG is on with ACCELBOARD_PRODUCTION=1",
        "(accelboard.E005) SITE_URL is http://127.1:8000",
    )
    assert "HINT: Set SECRET_KEY (or SECRET_KEY_FILE)" in result.stderr


def test_the_deploy_check_reports_a_plain_http_public_site_url(tmp_path: Path) -> None:
    env = {**UNSAFE_PRODUCTION, "SECRET_KEY": GOOD_SECRET, "ALLOWED_HOSTS": "accelboard.example.com"}
    env.pop("DEBUG")
    plain = run_check(tmp_path, "check", "--deploy", **(env | {"SITE_URL": "http://accelboard.example.com"}))
    assert_check_errors(plain, "(accelboard.E011) SITE_URL is http://accelboard.example.com: plain http")
    assert "accelboard.E005" not in plain.stderr
    tls = run_check(
        tmp_path,
        "check",
        "--deploy",
        "--fail-level",
        "ERROR",
        **(env | {"SITE_URL": "https://accelboard.example.com"}),
    )
    assert tls.returncode == 0, tls.stderr


@pytest.mark.parametrize("command", [["migrate"], ["-c", "import accelboard.wsgi"]], ids=["migrate", "wsgi"])
def test_everything_but_check_refuses_to_start_naming_every_unsafe_value(
    tmp_path: Path, command: list[str]
) -> None:
    if command[0] == "-c":  # gunicorn's import of the WSGI application
        env = {k: v for k, v in os.environ.items() if k not in _CONFIG_VARS} | UNSAFE_PRODUCTION
        env["ACCELBOARD_HOME"] = str(tmp_path / "home")
        result = subprocess.run(
            [sys.executable, *command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
        assert result.returncode != 0
        line = result.stderr.strip().splitlines()[-1]
        assert line.startswith("accelboard.env.ConfigError: ")
    else:
        line = assert_config_error(run_check(tmp_path, *command, **UNSAFE_PRODUCTION), "SECRET_KEY")
    assert "SECRET_KEY must be at least 50 characters" in line
    assert "DEBUG is on" in line and "ALLOWED_HOSTS contains '*'" in line


@pytest.mark.parametrize(
    "host",
    ["localhost", "LOCALHOST.", "app.localhost", "127.0.0.1", "127.1", "127.0.1", "0x7f.0.0.1", "0x7f000001",
     "2130706433", "017700000001", "0177.0.0.1", "127.255.255.254", "[::1]", "::1", "0:0:0:0:0:0:0:1",
     "[::ffff:127.0.0.1]", "0.0.0.0", "0", "[::]", ""],
)  # fmt: skip
def test_it_sees_every_spelling_of_this_machine(host: str) -> None:
    from accelboard.core.checks import _loopback_host

    assert _loopback_host(host)


@pytest.mark.parametrize(
    "host",
    ["accelboard.example.com", "10.0.0.5", "128.0.0.1", "0x80.0.0.1", "127.1.example.com", "localhost.example.com",
     "[2001:db8::1]", "[::ffff:10.0.0.1]", "127.0.0.1.nip.io", "1.2.3.4.5", "256.0.0.1", "+127.1", "127.1_0"],
)  # fmt: skip
def test_it_does_not_take_another_host_for_this_machine(host: str) -> None:
    from accelboard.core.checks import _loopback_host

    assert not _loopback_host(host)


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
