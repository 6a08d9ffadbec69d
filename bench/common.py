"""Shared by the benchmarks: a throw-away database, Django on it, a synthetic fleet, numpy COPY.

1. ``bench_database()`` creates ``accelboard_bench`` (``bench/ingest.py``: ``accelboard_bench_ingest``,
   so the two can run at once) on ``DATABASE_URL``'s server (or on the
   embedded default when ``DATABASE_URL`` is unset), points Django at it, migrates, and drops it
   on exit, also after an error or Ctrl-C. A second run of the same bench on the same server
   stops with a sentence (``bench_lock``) instead of dropping the first one's database.
2. ``fleet_create`` registers hosts and GPUs through the product's own ``host_register``.
3. ``copy_buffer`` builds a PostgreSQL binary COPY stream straight from numpy arrays (one
   structured array per chunk, no Python loop per row), so 10M rows load in tens of seconds.
4. ``quick_parse`` gives every bench ``--quick``: its smallest size, which proves that it runs to
   its last line (``tests/test_benches.py``) and whose figures mean nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from accelboard.env import database_url_with_name  # noqa: E402 - after ROOT is importable

BENCH_DB = "accelboard_bench"
PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_HEADER = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"
_TRAILER = b"\xff\xff"
# numpy big-endian layouts of the PostgreSQL binary types used by the raw telemetry table.
PG_TYPES = {"int8": ">i8", "int4": ">i4", "float4": ">f4", "float8": ">f8", "timestamptz": ">i8"}


def quick_parse(
    parser: argparse.ArgumentParser, argv: list[str] | None = None, **smallest: object
) -> argparse.Namespace:
    """Parse ``argv`` with a ``--quick`` flag added that sets each ``smallest`` option (by its
    ``dest``) to its value, whatever was given: the smallest run that still reaches every line."""
    sizes = " ".join(f"--{name.replace('_', '-')} {value}" for name, value in smallest.items())
    parser.add_argument(
        "--quick", action="store_true", help=f"smallest run, to check it works (figures meaningless): {sizes}"
    )
    args = parser.parse_args(argv)
    if args.quick:
        for name, value in smallest.items():
            setattr(args, name, value)
    return args


def server_url() -> str:
    url = os.environ.get("DATABASE_URL")
    if url:
        return url
    from accelboard.embedded import embedded_database_url

    return embedded_database_url(database="postgres")


def _admin(url: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(database_url_with_name(url, "postgres"), autocommit=True) as conn:
        conn.execute(sql)


def _broker_forget() -> None:
    """Forget the broker connections of an earlier bench database in this process.

    Without ``CELERY_BROKER_URL`` (the embedded default, or only ``DATABASE_URL`` set), the Celery
    broker is kombu's SQLAlchemy transport in the bench database itself; kombu caches its engine
    (and pooled connections) per URL and process. After the database was dropped (``WITH
    (FORCE)`` terminates those connections) and created again (``bench/pages.py``'s 10x pass), the
    next use of a pooled connection died: the migrate step's broker tables with ``AdminShutdown``
    on ``SELECT ... FROM kombu_queue``, and a first publish with ``relation "kombu_queue" does not
    exist`` (kombu makes its tables only when it makes the engine). So before ``migrate`` the
    connections go and the tables are made in the new database."""
    with contextlib.suppress(ImportError):
        from kombu.transport import sqlalchemy as sqla_transport
        from kombu.transport.sqlalchemy.models import metadata

        # Celery's pooled channels keep sessions bound to these engines: keep the engines, drop
        # their connections to the old database, and create the tables in the new one.
        for engine, _session in sqla_transport.Channel._engines.values():
            engine.dispose()
            metadata.create_all(engine)


@contextlib.contextmanager
def bench_lock(server: str, what: str) -> Iterator[None]:
    """Hold a PostgreSQL advisory lock on ``server`` named ``what`` for the block; exit 1 with a
    sentence when another process holds it. Two runs of one bench would drop each other's
    database (and purge each other's queues) and both print wrong figures."""
    import psycopg

    with psycopg.connect(database_url_with_name(server, "postgres"), autocommit=True) as conn:
        row = conn.execute(
            "SELECT pg_try_advisory_lock(hashtext(%s))", [f"accelboard bench: {what}"]
        ).fetchone()
        if not row or not row[0]:
            sys.exit(f"bench: another run is using {what} on this server; wait for it to end")
        try:
            yield
        finally:
            # Released here, not left to the connection's close: the server ends a closed
            # connection's backend (and frees its locks) a moment later, and a run started right
            # after this one could still find the lock held.
            if not conn.closed:
                conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", [f"accelboard bench: {what}"])


@contextlib.contextmanager
def bench_database(name: str = BENCH_DB) -> Iterator[str]:
    """A fresh database ``name`` with Django set up and migrated on it; dropped on exit. One run
    per name and server at a time (``bench_lock``)."""
    server = server_url()
    with bench_lock(server, f"database {name}"), _fresh_database(server, name) as url:
        yield url


@contextlib.contextmanager
def _fresh_database(server: str, name: str) -> Iterator[str]:
    url = database_url_with_name(server, name)
    _admin(server, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    _admin(server, f"CREATE DATABASE {name}")
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "accelboard.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    try:
        import django

        django.setup()
        from django.core.management import call_command

        _broker_forget()
        call_command("migrate", verbosity=0)
        yield url
    finally:
        with contextlib.suppress(Exception):
            from django.db import connections

            connections.close_all()
        _admin(server, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def production_env(url: str, broker: str) -> dict[str, str]:
    """The environment of a server process run as the Dockerfile runs it (``ACCELBOARD_PRODUCTION=1``:
    DEBUG off, so no query log or SQL formatting per query), on ``url`` and ``broker``. The bench
    speaks plain HTTP to gunicorn on loopback, so the redirect to HTTPS (done in front of it in
    production) is off."""
    return {
        **os.environ,
        "ACCELBOARD_PRODUCTION": "1",
        "SECRET_KEY": "bench-" + secrets.token_hex(32),
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "SECURE_SSL_REDIRECT": "0",
        # Production's checks want a mail server named; the benches have no subscribers to mail.
        "EMAIL_HOST": "127.0.0.1",
        "DATABASE_URL": url,
        "CELERY_BROKER_URL": broker,
        "LOG_LEVEL": "WARNING",
    }


def fleet_create(*, hosts: int, gpus_per_host: int) -> list[tuple[int, list[int]]]:
    """``hosts`` hosts of ``gpus_per_host`` H100s; returns [(host_id, [gpu ids])]."""
    from accelboard.fleet.host_services import host_register
    from accelboard.fleet.models import AcceleratorType

    AcceleratorType.objects.get_or_create(
        name="H100 SXM 80GB",
        defaults={"slug": "h100-sxm-80gb", "match_names": ["H100 80GB HBM3"], "board_power_w": 700.0},
    )
    fleet = []
    for h in range(hosts):
        accelerators = [
            {"uuid": f"GPU-bench-{h:03d}-{g}", "index": g, "name": "NVIDIA H100 80GB HBM3"}
            for g in range(gpus_per_host)
        ]
        host, by_uuid = host_register(hostname=f"bench-node-{h:03d}", team_id=None, accelerators=accelerators)
        fleet.append((host.pk, [by_uuid[a["uuid"]].pk for a in accelerators]))
    return fleet


def copy_buffer(columns: list[tuple[str, str, np.ndarray]]) -> bytes:
    """A complete binary COPY stream for ``(name, pg type, values)`` columns of equal length.

    Timestamps are given as microseconds since 2000-01-01 UTC (PostgreSQL's epoch). No NULLs.
    """
    rows = len(columns[0][2])
    fields = [("count", ">i2")]
    for index, (_, pg_type, _) in enumerate(columns):
        fields += [(f"len{index}", ">i4"), (f"val{index}", PG_TYPES[pg_type])]
    out = np.empty(rows, dtype=np.dtype(fields))
    out["count"] = len(columns)
    for index, (_, pg_type, values) in enumerate(columns):
        out[f"len{index}"] = np.dtype(PG_TYPES[pg_type]).itemsize
        out[f"val{index}"] = values
    return _HEADER + out.tobytes() + _TRAILER


def copy_into(cursor, table: str, columns: list[tuple[str, str, np.ndarray]]) -> int:  # type: ignore[no-untyped-def]
    names = ", ".join(name for name, _, _ in columns)
    with cursor.copy(f"COPY {table} ({names}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.write(copy_buffer(columns))
    return len(columns[0][2])


def to_pg_micros(epoch_seconds: np.ndarray) -> np.ndarray:
    return ((epoch_seconds - PG_EPOCH.timestamp()) * 1_000_000).astype(np.int64)


def median_ms(fn: Callable[[], object], *, repeat: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)
