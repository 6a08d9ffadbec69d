"""Tasks that only test workers load (``celery worker --include tests.celery_test_tasks``)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from celery import shared_task


@shared_task(bind=True)
def wait_for_file(self: object, go: str, journal: str) -> int:
    """Note the start in ``journal``, block until ``go`` exists, note the end; the worker's pid."""
    with open(journal, "a") as out:
        out.write(f"started {os.getpid()}\n")
    while not Path(go).exists():
        time.sleep(0.05)
    with open(journal, "a") as out:
        out.write(f"done {os.getpid()}\n")
    return os.getpid()
