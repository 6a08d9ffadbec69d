"""The typed environment readers in ``accelboard.env``: values, defaults, and loud failures."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelboard.embedded import broker_url_for
from accelboard.env import (
    ConfigError,
    database_url_with_name,
    env_bool,
    env_float,
    env_int,
    env_list,
    env_secret,
    env_str,
    parse_database_url,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1", True),
        ("true", True),
        (" YES ", True),
        ("on", True),
        ("0", False),
        ("False", False),
        ("no", False),
    ],
)
def test_it_reads_booleans(monkeypatch: pytest.MonkeyPatch, raw: str, expected: bool) -> None:
    monkeypatch.setenv("FLAG", raw)
    assert env_bool("FLAG", not expected) is expected


def test_it_uses_the_boolean_default_when_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLAG", raising=False)
    assert env_bool("FLAG", True) is True
    assert env_bool("FLAG", False) is False


def test_it_rejects_a_boolean_it_cannot_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEBUG", "maybe")
    with pytest.raises(ConfigError, match=r"^DEBUG='maybe' is not a boolean"):
        env_bool("DEBUG")


def test_it_reads_integers_with_a_minimum(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("N", " 42 ")
    assert env_int("N", 1, minimum=1) == 42
    monkeypatch.setenv("N", "")
    assert env_int("N", 7) == 7
    monkeypatch.delenv("N")
    assert env_int("N", 9) == 9


def test_it_rejects_a_non_integer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMAIL_PORT", "25a")
    with pytest.raises(ConfigError, match=r"^EMAIL_PORT='25a' is not an integer"):
        env_int("EMAIL_PORT", 25)


def test_it_rejects_an_integer_below_the_minimum(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TELEMETRY_RETENTION_DAYS", "0")
    with pytest.raises(ConfigError, match=r"^TELEMETRY_RETENTION_DAYS=0 must be at least 1"):
        env_int("TELEMETRY_RETENTION_DAYS", 30, minimum=1)


def test_it_reads_floats(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLL", "0.25")
    assert env_float("POLL", 1.0) == 0.25
    monkeypatch.setenv("POLL", "fast")
    with pytest.raises(ConfigError, match=r"^POLL='fast' is not a number"):
        env_float("POLL", 1.0)


def test_it_splits_lists_and_drops_blanks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALLOWED_HOSTS", " a.example.com, ,b.example.com,")
    assert env_list("ALLOWED_HOSTS") == ["a.example.com", "b.example.com"]
    monkeypatch.delenv("ALLOWED_HOSTS")
    assert env_list("ALLOWED_HOSTS", ["localhost"]) == ["localhost"]
    monkeypatch.setenv("ALLOWED_HOSTS", "")
    assert env_list("ALLOWED_HOSTS", ["localhost"]) == []


def test_it_reads_strings_with_a_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TIME_ZONE", raising=False)
    assert env_str("TIME_ZONE", "UTC") == "UTC"
    monkeypatch.setenv("TIME_ZONE", "Europe/Paris")
    assert env_str("TIME_ZONE", "UTC") == "Europe/Paris"


def test_it_reads_a_secret_from_its_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s3cret-from-file\n")
    monkeypatch.setenv("SECRET_KEY", "from-the-variable")
    monkeypatch.setenv("SECRET_KEY_FILE", str(secret))
    # The file wins (Docker/Kubernetes secrets), and its trailing newline is not part of the key.
    assert env_secret("SECRET_KEY") == "s3cret-from-file"


def test_it_reads_a_secret_from_the_variable_or_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SECRET_KEY_FILE", raising=False)
    monkeypatch.setenv("SECRET_KEY", "abc")
    assert env_secret("SECRET_KEY") == "abc"
    monkeypatch.delenv("SECRET_KEY")
    assert env_secret("SECRET_KEY") is None
    assert env_secret("SECRET_KEY", "fallback") == "fallback"


def test_it_fails_on_a_secret_file_that_is_not_there(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    monkeypatch.setenv("SECRET_KEY_FILE", str(missing))
    with pytest.raises(ConfigError, match=r"^SECRET_KEY_FILE=.*nope.* cannot be read"):
        env_secret("SECRET_KEY")


def test_it_fails_on_an_empty_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DATABASE_URL_FILE", raising=False)
    monkeypatch.setenv("DATABASE_URL", "  ")
    with pytest.raises(ConfigError, match=r"^DATABASE_URL is set but empty"):
        env_secret("DATABASE_URL")


def test_it_parses_a_tcp_database_url() -> None:
    db = parse_database_url(
        "DATABASE_URL", "postgresql://acc%40board:p%3Ass@db.example.com:6543/metrics?sslmode=require"
    )
    assert db == {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "metrics",
        "USER": "acc@board",
        "PASSWORD": "p:ss",
        "HOST": "db.example.com",
        "PORT": "6543",
        "OPTIONS": {"sslmode": "require"},
    }


@pytest.mark.parametrize("scheme", ["postgres", "postgresql", "pgsql", "postgresql+psycopg"])
def test_it_accepts_every_postgres_scheme(scheme: str) -> None:
    assert parse_database_url("DATABASE_URL", f"{scheme}://u@h/db")["NAME"] == "db"


def test_it_parses_a_unix_socket_url_given_as_a_host_query() -> None:
    db = parse_database_url("DATABASE_URL", "postgresql://postgres@/accelboard?host=/srv/Data/pg-socket")
    assert db["HOST"] == "/srv/Data/pg-socket"
    assert db["PORT"] == ""
    assert db["NAME"] == "accelboard"
    assert db["USER"] == "postgres"
    # "host" was consumed as the socket directory, not passed on as a connection option.
    assert db["OPTIONS"] == {}


def test_it_parses_a_unix_socket_url_given_percent_encoded() -> None:
    db = parse_database_url("DATABASE_URL", "postgresql://postgres@%2Fvar%2Frun%2Fpostgresql/accelboard")
    assert db["HOST"] == "/var/run/postgresql"
    assert db["NAME"] == "accelboard"


def test_it_keeps_only_known_connection_options() -> None:
    db = parse_database_url(
        "DATABASE_URL",
        "postgresql://u@h/db?sslmode=verify-full&sslrootcert=/ca.pem&application_name=web&connect_timeout=5",
    )
    assert db["OPTIONS"] == {
        "sslmode": "verify-full",
        "sslrootcert": "/ca.pem",
        "application_name": "web",
        "connect_timeout": "5",
    }


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("postgresql://u@h:notaport/db", r"^DATABASE_URL is malformed .*expected postgresql://"),
        ("mysql://u:p@h:3306/db", r"^DATABASE_URL has scheme 'mysql'; accelboard needs PostgreSQL"),
        ("sqlite:///db.sqlite3", r"^DATABASE_URL has scheme 'sqlite'"),
        ("db.example.com/metrics", r"^DATABASE_URL has scheme ''"),
        ("postgresql://u@h:5432/", r"^DATABASE_URL names no database"),
        ("postgresql://u@h:5432", r"^DATABASE_URL names no database"),
        ("postgresql://u@h/a/b", r"^DATABASE_URL names no database"),
        ("postgresql://u@h:99999/db", r"^DATABASE_URL is malformed"),
    ],
)
def test_it_rejects_a_bad_database_url_naming_the_variable(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_database_url("DATABASE_URL", url)


def test_it_derives_the_sqlalchemy_broker_from_the_database_url() -> None:
    assert (
        broker_url_for("postgresql://postgres@/accelboard?host=/tmp/pg")
        == "sqla+postgresql+psycopg://postgres@/accelboard?host=/tmp/pg"
    )
    assert broker_url_for("postgres://u:p@db:5432/acc") == "sqla+postgresql+psycopg://u:p@db:5432/acc"


def test_it_names_another_database_on_the_same_server_without_touching_a_socket_path() -> None:
    # The embedded default's URL keeps its socket directory in the query: splitting on '/' cut it.
    assert (
        database_url_with_name("postgresql://postgres@/accelboard?host=/tmp/x/pgdata", "postgres")
        == "postgresql://postgres@/postgres?host=/tmp/x/pgdata"
    )
    assert (
        database_url_with_name("postgresql://u:p@db:5432/acc", "acc_fuzz")
        == "postgresql://u:p@db:5432/acc_fuzz"
    )
