"""The embedded broker's redelivery: a task whose worker died is run again, as on Redis.

kombu's SQLAlchemy transport (the broker of the embedded default and the demo) marks a message
invisible when a consumer takes it and never looks at it again: an acknowledgement changes
nothing in the table, and a message whose worker was killed mid-task (``kill -9``, the OOM
killer) stays invisible for ever, so late acknowledgement bought nothing there. This channel
(installed on the transport by ``accelboard.celery``) adds what Redis' visibility timeout gives,
tied to the consumer's life instead of a clock:

1. Each consuming channel holds a PostgreSQL session advisory lock ``(LOCK_NAMESPACE, key)`` on a
   connection of its own, ``key`` random. PostgreSQL releases it the moment that process dies.
2. Taking a message writes ``key`` into its payload's ``delivery_info`` (``OWNER_FIELD``) in the
   same transaction that makes it invisible.
3. An acknowledged or rejected message's row is deleted (kombu's own channel kept every row).
   A clean shutdown puts its unacknowledged messages back (kombu's ``restore_unacked``) and
   deletes their taken rows.
4. Every channel, when it opens and then every ``RESTORE_INTERVAL_S``, makes visible again each
   taken message whose owner's lock nobody holds: its worker is gone, the task runs again.

5. The channel's SQLAlchemy session is used under one lock per channel: a solo worker runs a task
   whose ETA or countdown came due on its timer thread, whose acknowledgement (point 3) would
   otherwise use the session while the main thread polls with it (SQLAlchemy sessions are not
   thread-safe: "session is in 'prepared' state" and the worker's exit).

Unlike a visibility timeout, a task that runs for hours is never handed to a second worker while
its own is alive. Rows taken by kombu's plain channel (no owner) are left as they are.
Only PostgreSQL is handled; on another database the channel behaves as kombu's.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from queue import Empty
from typing import Any

from kombu.transport import sqlalchemy as sqla_transport
from kombu.utils.encoding import bytes_to_str
from sqlalchemy import text

# The first half of the advisory lock's two-int key: "accelboard broker" (any fixed int4 > 0).
LOCK_NAMESPACE = 0x0ACC_B0AD
OWNER_FIELD = "accelboard_consumer"
RESTORE_INTERVAL_S = 5.0


class RedeliveringChannel(sqla_transport.Channel):
    """kombu's SQLAlchemy channel with redelivery of a dead consumer's messages (module doc)."""

    restore_interval = RESTORE_INTERVAL_S

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._owner_key: int | None = None
        self._owner_connection: Any = None
        self._rows: dict[str, int] = {}
        self._restored_at = float("-inf")
        self._session_lock = threading.RLock()  # point 5
        super().__init__(*args, **kwargs)

    def _postgres(self) -> bool:
        return bool(self.session.bind.dialect.name == "postgresql")

    def _owner(self) -> int:
        """This channel's key, its advisory lock taken on a connection held until close."""
        if self._owner_key is None:
            engine, _session = self._open()
            connection = engine.connect()
            key = secrets.randbelow(2**31 - 2) + 1
            connection.execute(text("SELECT pg_advisory_lock(:ns, :key)"), {"ns": LOCK_NAMESPACE, "key": key})
            connection.commit()
            self._owner_connection, self._owner_key = connection, key
        return self._owner_key

    def orphans_restore(self) -> int:
        """Make visible again the taken messages whose consumer is gone; how many."""
        with self._session_lock:
            return self._orphans_restore()

    def _orphans_restore(self) -> int:
        table = self.message_tablename
        owner = f"(payload::jsonb #>> '{{properties,delivery_info,{OWNER_FIELD}}}')"
        result = self.session.execute(
            text(
                f"UPDATE {table} SET visible = true, version = version + 1 "  # noqa: S608 - names from config
                f"WHERE visible = false AND payload LIKE :marker AND {owner} IS NOT NULL "
                "AND NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' "
                "AND l.classid = CAST(:ns AS oid) AND l.objsubid = 2 "
                f"AND l.objid = CAST(CAST({owner} AS bigint) AS oid) AND l.granted)"
            ),
            {"ns": LOCK_NAMESPACE, "marker": f"%{OWNER_FIELD}%"},
        )
        self.session.commit()
        self._restored_at = time.monotonic()
        return int(getattr(result, "rowcount", 0) or 0)

    def _put(self, queue: Any, payload: Any, **kwargs: Any) -> Any:  # type: ignore[override]  # kombu: its two bases disagree
        with self._session_lock:
            return super()._put(queue, payload, **kwargs)

    def _purge(self, queue: str) -> int:
        with self._session_lock:
            return int(super()._purge(queue))

    def _size(self, queue: str) -> int:
        with self._session_lock:
            return int(super()._size(queue))

    def _get(self, queue: str, timeout: float | None = None) -> dict[str, Any]:
        with self._session_lock:
            return self._take(queue)

    def _take(self, queue: str) -> dict[str, Any]:
        if not self._postgres():
            return dict(super()._get(queue))
        key = self._owner()
        if time.monotonic() - self._restored_at >= self.restore_interval:
            self.orphans_restore()
        obj = self._get_or_create(queue)
        message_cls = self.message_cls
        try:
            row = (
                self.session.query(message_cls)
                .with_for_update(skip_locked=True)
                .filter(message_cls.queue_id == obj.id)
                .filter(message_cls.visible != False)  # noqa: E712 - SQLAlchemy's operator
                .order_by(message_cls.sent_at)
                .order_by(message_cls.id)
                .limit(1)
                .first()
            )
            if row is None:
                raise Empty()
            payload: dict[str, Any] = json.loads(bytes_to_str(row.payload))
            properties = payload.setdefault("properties", {})
            properties.setdefault("delivery_info", {})[OWNER_FIELD] = key
            row.visible = False
            row.payload = json.dumps(payload)
            tag = properties.get("delivery_tag")
            if tag:
                self._rows[str(tag)] = int(row.id)
            return payload
        finally:
            self.session.commit()

    def _row_delete(self, delivery_tag: object) -> None:
        row_id = self._rows.pop(str(delivery_tag), None)
        if row_id is None:
            return
        with self._session_lock:
            self.session.execute(text(f"DELETE FROM {self.message_tablename} WHERE id = :id"), {"id": row_id})  # noqa: S608
            self.session.commit()

    def basic_ack(self, delivery_tag: str, multiple: bool = False) -> None:
        super().basic_ack(delivery_tag, multiple=multiple)
        self._row_delete(delivery_tag)

    def basic_reject(self, delivery_tag: str, requeue: bool = False) -> None:
        # With requeue, kombu puts a copy back (``_restore``, which deletes the taken row).
        super().basic_reject(delivery_tag, requeue=requeue)
        self._row_delete(delivery_tag)

    def _restore(self, message: Any) -> None:
        with self._session_lock:
            super()._restore(message)
            self._row_delete(message.delivery_tag)

    def close(self) -> None:
        try:
            with self._session_lock:
                super().close()  # puts unacknowledged messages back first (point 3)
        finally:
            if self._owner_connection is not None:
                # Closed for real, not returned to the pool still holding the lock.
                self._owner_connection.invalidate()
                self._owner_connection.close()
                self._owner_connection = None


def redelivery_install() -> None:
    """Use ``RedeliveringChannel`` for every SQLAlchemy broker connection of this process."""
    sqla_transport.Transport.Channel = RedeliveringChannel
