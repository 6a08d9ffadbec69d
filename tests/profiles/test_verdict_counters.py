"""The verdict uses the profiling counters of the run's window where telemetry has them
(``verdict.verdict_with_counters``): each counter rule on both sides of its threshold, a verdict
without counters that still names the bound as unknown, and the Profile tab showing it."""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.urls import reverse

from accelboard.benchmarks.models import BenchmarkRun
from accelboard.fleet.models import Accelerator
from accelboard.fleet.rollup_services import telemetry_rollups_refresh
from accelboard.importers.profile_data import KERNEL, MEMCPY
from accelboard.profiles import verdict as rules
from accelboard.profiles.models import Profile
from accelboard.profiles.services import profile_attach
from accelboard.testing.traces import write_training_trace
from tests import factories

from .test_verdict_evidence import _timeline

UNKNOWN_BOUND = (
    "whether these kernels are limited by arithmetic or by memory bandwidth (no hardware counters)"
)


def _compute_bound() -> dict[str, Any]:
    # GEMM [0, 90] then a copy [90, 100]: compute 90% of the timeline.
    summary = _timeline(["bf16_gemm", "Memcpy HtoD"], [0.0, 90.0], [90.0, 10.0], kinds=[KERNEL, MEMCPY])
    assert summary["verdict"]["kind"] == "compute-bound"
    return summary["verdict"]


@pytest.mark.parametrize(
    ("tensor", "dram", "bound"),
    [
        (None, None, None),
        (51.0, 20.0, "tensor"),  # tensor ≥ TENSOR_BUSY_PCT
        (49.0, 20.0, "neither"),  # just under it
        (20.0, 50.0, "memory"),  # DRAM ≥ DRAM_BUSY_PCT and above the tensor pipes
        (20.0, 49.0, "neither"),  # just under it
        (70.0, 60.0, "tensor"),  # DRAM busy but below the tensor pipes
        (60.0, 70.0, "memory"),  # ... and above them
        (60.0, 60.0, "tensor"),  # a tie is not "DRAM busier"
        (None, 55.0, "memory"),  # tensor unknown: DRAM alone
        (55.0, None, "tensor"),
        (None, 45.0, "neither"),
    ],
)
def test_counters_bound_on_both_sides_of_each_threshold(
    tensor: float | None, dram: float | None, bound: str | None
) -> None:
    assert rules.TENSOR_BUSY_PCT == rules.DRAM_BUSY_PCT == 50.0
    assert rules.counters_bound(tensor, dram) == bound


def test_without_counters_the_verdict_is_unchanged_and_the_bound_unknown() -> None:
    verdict = _compute_bound()
    for counters in (None, {"tensor_active": None, "dram_active": None}):
        out = rules.verdict_with_counters(verdict, counters)
        assert out == verdict and "counters" not in out
        assert UNKNOWN_BOUND in out["unknown"]
        assert out["details"][-1] == f"Unknown: {UNKNOWN_BOUND}."


@pytest.mark.parametrize(
    ("tensor", "dram", "kind", "headline"),
    [
        (
            51.0,
            30.0,
            "compute-bound",
            "Compute-bound on tensor cores: compute kernels run 90% of the time with the tensor pipes active 51%",
        ),
        (
            49.0,
            30.0,
            "compute-bound",
            "Compute-bound, neither pipe saturated: compute kernels run 90% of the time, tensor pipes 49%, DRAM 30%",
        ),
        (
            30.0,
            50.0,
            "memory-traffic-bound",
            "Memory-bandwidth-bound: compute kernels run 90% of the time with DRAM active 50%",
        ),
        (
            30.0,
            49.0,
            "compute-bound",
            "Compute-bound, neither pipe saturated: compute kernels run 90% of the time, tensor pipes 30%, DRAM 49%",
        ),
    ],
)
def test_with_counters_a_compute_bound_verdict_says_which_pipe_limits_it(
    tensor: float, dram: float, kind: str, headline: str
) -> None:
    verdict = _compute_bound()
    stored = {**verdict, "details": list(verdict["details"])}
    out = rules.verdict_with_counters(verdict, {"tensor_active": tensor, "dram_active": dram})
    assert verdict == stored  # the stored verdict is not touched
    assert out["kind"] == kind and out["headline"] == headline
    assert out["unknown"] == [] and not any(line.startswith("Unknown:") for line in out["details"])
    assert any(
        f"tensor pipes active {tensor:.0f}%, DRAM active {dram:.0f}%" in line for line in out["details"]
    )
    assert out["counters"] == {
        "tensor_active": tensor,
        "dram_active": dram,
        "bound": rules.counters_bound(tensor, dram),
        "changed": True,
    }
    assert out["numbers"] == verdict["numbers"]  # the numbers it was decided on stay


def test_other_verdicts_keep_their_kind_and_gain_the_counters_line() -> None:
    # Copies 40% of the span: memory-traffic-bound by the timeline; busy tensor pipes do not undo it.
    summary = _timeline(["bf16_gemm", "Memcpy HtoD"], [0.0, 60.0], [60.0, 40.0], kinds=[KERNEL, MEMCPY])
    verdict = summary["verdict"]
    out = rules.verdict_with_counters(verdict, {"tensor_active": 80.0, "dram_active": 10.0})
    assert (
        (out["kind"], out["headline"])
        == (verdict["kind"], verdict["headline"])
        == (
            "memory-traffic-bound",
            "Memory-traffic-bound: copies and memsets take 40% of GPU time",
        )
    )
    assert out["details"][:-1] == verdict["details"]
    assert out["details"][-1].startswith(
        "Profiling counters, means over the run's window and GPUs: tensor pipes active 80%"
    )
    assert out["counters"]["changed"] is False and out["counters"]["bound"] == "tensor"


# --- the Profile tab --------------------------------------------------------------------------------


def _counters(gpu: Accelerator, since: Any, until: Any, *, tensor: float, dram: float) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE fleet_telemetrysample SET tensor_active = %s, dram_active = %s "
            "WHERE accelerator_id = %s AND time >= %s",
            [tensor, dram, gpu.pk, since],
        )
    telemetry_rollups_refresh(start=since - timedelta(hours=1), end=until + timedelta(minutes=5))


@pytest.fixture
def compute_bound_run(team: Any) -> dict[str, Any]:
    """A run on a two-GPU host inside its telemetry, with a profile whose stored verdict is compute-bound."""
    factories.accelerator_type_from(factories.H100)
    host, gpus = factories.host_create(team=team, gpus=2)
    times = factories.telemetry_days_load(gpus=gpus, days=1, interval_s=300).times
    h100 = Accelerator.objects.get(pk=gpus[0].pk).accelerator_type
    run = factories.run_create(team=team, accelerator_type=h100, accelerator_count=2, host=host)
    BenchmarkRun.objects.filter(pk=run.pk).update(started_at=times[-24], finished_at=times[-12])
    buffer = io.BytesIO()
    write_training_trace(buffer)
    profile = profile_attach(run=run, files=[("rank0.json", buffer.getvalue())])
    verdict = _compute_bound()
    Profile.objects.filter(pk=profile.pk).update(verdict=verdict, verdict_kind=verdict["kind"])
    run.refresh_from_db()
    return {"run": run, "gpus": gpus, "times": times}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("tensor", "dram", "kind", "start"),
    [
        (72.0, 30.0, "compute-bound", "Compute-bound on tensor cores"),
        (20.0, 64.0, "memory-traffic-bound", "Memory-bandwidth-bound"),
    ],
)
def test_the_profile_tab_shows_the_verdict_the_counters_give(
    compute_bound_run: dict[str, Any],
    login_client: Any,
    lead: Any,
    tensor: float,
    dram: float,
    kind: str,
    start: str,
) -> None:
    run, gpus, times = compute_bound_run["run"], compute_bound_run["gpus"], compute_bound_run["times"]
    for gpu in gpus:  # both GPUs: their mean is the value itself
        _counters(gpu, times[-36], times[-1], tensor=tensor, dram=dram)
    response = login_client(lead).get(reverse("profiles:run_profile", args=[run.pk]))
    assert response.status_code == 200
    verdict = response.context["verdict"]
    assert verdict["kind"] == kind and verdict["headline"].startswith(start)
    assert verdict["counters"]["tensor_active"] == pytest.approx(tensor)
    page = response.content.decode()
    assert f'data-kind="{kind}"' in page and start in page
    assert "no hardware counters" not in page
    assert Profile.objects.get(run=run).verdict_kind == "compute-bound"  # the stored verdict stays


@pytest.mark.django_db
def test_the_profile_tab_without_counters_keeps_the_bound_unknown(
    compute_bound_run: dict[str, Any], login_client: Any, lead: Any
) -> None:
    response = login_client(lead).get(reverse("profiles:run_profile", args=[compute_bound_run["run"].pk]))
    verdict = response.context["verdict"]
    assert response.context["counters"] is None and "counters" not in verdict
    assert verdict["kind"] == "compute-bound"
    assert UNKNOWN_BOUND in response.content.decode()
