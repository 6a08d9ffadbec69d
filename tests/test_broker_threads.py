"""The embedded broker's channel used from two threads at once, as a solo Celery worker does.

A solo worker polls on its main thread and runs a task whose ETA or countdown came due on its
timer thread; that task's acknowledgement deletes its row (``accelboard.broker``, point 3) on the
same channel. Without the channel's lock the two threads share one SQLAlchemy session, and the
worker exits with "This session is in 'prepared' state" (seen in the demo's worker log).
"""

from __future__ import annotations

import queue
import threading
import time
import uuid
from typing import Any

import pytest
from kombu import Connection
from sqlalchemy import text

from accelboard.broker import RedeliveringChannel, redelivery_install
from accelboard.embedded import broker_url_for

from .test_celery_worker import database_url_of_tests

pytestmark = pytest.mark.django_db(transaction=True)

MESSAGES = 300


def test_a_task_acknowledged_on_another_thread_while_the_main_thread_polls_breaks_nothing() -> None:
    redelivery_install()
    name = f"threads-{uuid.uuid4().hex[:8]}"
    errors: list[BaseException] = []
    taken: queue.Queue[str] = queue.Queue()
    done = threading.Event()
    acked = 0
    with Connection(broker_url_for(database_url_of_tests())) as connection:
        channel: Any = connection.channel()
        assert isinstance(channel, RedeliveringChannel)
        for i in range(MESSAGES):
            channel._put(name, {"body": str(i), "properties": {"delivery_tag": f"{name}-{i}"}})

        def poll() -> None:  # the worker's main thread: take messages as fast as they come
            try:
                while not done.is_set():
                    try:
                        message = channel._get(name)
                    except queue.Empty:
                        continue
                    taken.put(message["properties"]["delivery_tag"])
            except BaseException as exc:  # noqa: BLE001 - the failure under test
                errors.append(exc)
                done.set()

        def acknowledge() -> None:  # the timer thread: each task's acknowledgement, a restore now and then
            nonlocal acked
            try:
                while acked < MESSAGES and not done.is_set():
                    try:
                        tag = taken.get(timeout=0.5)
                    except queue.Empty:
                        continue
                    channel._row_delete(tag)
                    acked += 1
                    if acked % 25 == 0:
                        channel.orphans_restore()
            except BaseException as exc:  # noqa: BLE001 - the failure under test
                errors.append(exc)
            finally:
                done.set()

        threads = [threading.Thread(target=poll), threading.Thread(target=acknowledge)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 60
        while not done.is_set() and time.monotonic() < deadline:
            time.sleep(0.05)
        done.set()
        for thread in threads:
            thread.join(timeout=10)
        assert errors == []
        assert acked == MESSAGES
        with channel._session_lock:
            left = channel.session.execute(
                text(
                    f"SELECT count(*) FROM {channel.message_tablename} m JOIN {channel.queue_tablename} q "  # noqa: S608
                    "ON q.id = m.queue_id WHERE q.name = :name"
                ),
                {"name": name},
            ).scalar_one()
            channel.session.commit()
        assert left == 0  # every acknowledged message's row deleted, none left behind
