"""The web workers' cyclic collector (``gunicorn_conf.collector_settle``, run before they fork)."""

from __future__ import annotations

import gc

from accelboard import gunicorn_conf


def test_the_master_freezes_what_it_loaded_and_raises_the_young_threshold_for_its_workers() -> None:
    before = gc.get_threshold()
    try:
        gunicorn_conf.collector_settle()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (gunicorn_conf.GC_YOUNG_THRESHOLD, *before[1:])
        assert before[0] < gunicorn_conf.GC_YOUNG_THRESHOLD
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
