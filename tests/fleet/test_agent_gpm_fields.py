"""The agent's NVML GPM metrics (``accelboard_agent.gpus.GPM_METRICS``) are sent under the
telemetry API's profiling fields, the ones DCGM's counters fill, in the API's unit (%)."""

from __future__ import annotations

import pytest
from accelboard_agent.gpus import GPM_METRICS
from pydantic import ValidationError

from accelboard.api.schemas import TelemetrySampleIn
from accelboard.fleet.partials import PROFILING_FIELDS


def test_every_gpm_metric_is_a_profiling_field_and_every_profiling_field_has_one() -> None:
    assert sorted(GPM_METRICS.values()) == sorted(PROFILING_FIELDS)


def test_the_api_takes_a_sample_with_gpm_percentages() -> None:
    base = {"time": 1_767_000_000.0, "gpu": "GPU-fake-0000-aaaa"}
    sample = TelemetrySampleIn.model_validate({**base, **dict.fromkeys(GPM_METRICS.values(), 100.0)})
    assert sample.tensor_active == 100.0 and sample.dram_active == 100.0
    with pytest.raises(ValidationError):
        TelemetrySampleIn.model_validate({**base, "tensor_active": -1.0})
