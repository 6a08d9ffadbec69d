"""Remote-write remembers each vLLM/Triton counter's last sample; the daily job forgets those of
series unseen for over a day (their next sample is a new baseline anyway), and only those."""

from __future__ import annotations

import time
from typing import Any

import pytest

from accelboard.celery import build_beat_schedule
from accelboard.core.models import JobRun
from accelboard.serving.models import PrometheusSeriesState
from accelboard.serving.remote_write import MAX_INTERVAL_MS
from accelboard.serving.tasks import prometheus_series_state_forget

pytestmark = pytest.mark.django_db


def test_the_daily_job_forgets_only_series_unseen_for_a_day(team: Any) -> None:
    now_ms = int(time.time() * 1000)
    for key, age_ms in (
        ("fresh", 60_000),
        ("edge", MAX_INTERVAL_MS - 60_000),
        ("gone", MAX_INTERVAL_MS + 60_000),
    ):
        PrometheusSeriesState.objects.create(
            team=team, key=key, metric="vllm:generation_tokens_total", last_ms=now_ms - age_ms, value=1.0
        )
    result = prometheus_series_state_forget.apply().get()
    assert result == {"forgotten": 1}
    assert set(PrometheusSeriesState.objects.values_list("key", flat=True)) == {"fresh", "edge"}
    assert JobRun.objects.get(name="prometheus_series_state_forget").rows == 1
    assert build_beat_schedule({})["prometheus-series-forget"]["task"] == prometheus_series_state_forget.name
