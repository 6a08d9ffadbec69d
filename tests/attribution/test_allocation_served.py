"""The model a workload served, from the serving metrics on the GPUs it held (docs/attribution.md,
"Rules"), in the allocation job on the real database: ``model_name`` rules select it, a label rule
wins over them, and without a rule the metrics' own model and variant are the workload's.

The world is tests/attribution/conftest.py's shared host (2026-11-10): pod a holds the full GPU
all day, a 3-slice MIG instance all day and half the time-sliced GPU for 12 h (495.11 USD); pod b
the other half of the time-sliced GPU and a 2-slice instance for 12 h (115.88 USD); the unmapped
pod x the time-sliced GPU from 12:00 to 18:00 (73.74 USD, unattributed); nobody holds it after.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accelboard.attribution.models import AllocationDaily
from accelboard.attribution.services import RuleInput, allocation_day_compute, rule_set_save
from accelboard.benchmarks.services import model_variant_get_or_create
from accelboard.fleet.models import Host, Workload
from accelboard.serving.models import InferenceMetric

from .conftest import DAY, FULL, IDLE, MIG, MIG_2, MIG_3, POD_A, POD_B, POD_X, T0, TS, rules_v1

pytestmark = pytest.mark.django_db

MIXTRAL_HF = "mistralai/Mixtral-8x7B-Instruct"  # the name the serving engine reports


def _served(
    world: dict[str, Any],
    model: str,
    variant: str,
    uuids: list[str],
    *,
    start: datetime = T0,
    hours: float = 24,
    tokens: int = 1_000_000,
    host: Host | None = None,
) -> None:
    """Serving metrics of ``model`` ``variant`` on ``uuids``, 5-minute intervals from ``start``."""
    row = model_variant_get_or_create(model=model, variant=variant, precision=variant)
    host = host or world["gpu"][FULL].host
    steps = int(hours * 12)
    InferenceMetric.objects.bulk_create(
        InferenceMetric(
            team=world["team"],
            host=host,
            variant=row,
            accelerator_uuids=uuids,
            interval_start=start + timedelta(minutes=5 * n),
            interval_s=300,
            requests=10,
            generated_tokens=tokens // steps,
        )
        for n in range(steps)
    )


def _models(**filters: Any) -> dict[str, set[tuple[str, str, str]]]:
    """Per workload uid (None: idle and uncovered time): its lines' (model, variant, source)."""
    out: dict[str, set[tuple[str, str, str]]] = defaultdict(set)
    for uid, model, variant, source in AllocationDaily.objects.filter(**filters).values_list(
        "workload__uid", "model", "variant", "model_source"
    ):
        out[uid].add((model, variant, source))
    return dict(out)


def _sums(by: str, **filters: Any) -> dict[Any, Decimal]:
    out: dict[Any, Decimal] = defaultdict(Decimal)
    for key, cost in AllocationDaily.objects.filter(**filters).values_list(by, "cost_allocation"):
        out[key] += cost
    return dict(out)


def _rules(world: dict[str, Any], *extra: RuleInput, note: str = "") -> None:
    rule_set_save(
        user=world["staff"], rules=[*rules_v1(world["team"], world["other_team"]), *extra], note=note
    )


def test_without_a_rule_the_metrics_own_model_and_variant_are_the_workloads(world: dict[str, Any]) -> None:
    _served(world, "Qwen3-8B", "bf16", [FULL])
    allocation_day_compute(day=DAY)
    # Pod a served Qwen3-8B bf16 on the full GPU: every line of its day says so, from the metrics.
    assert _models(workload__uid=POD_A["uid"]) == {POD_A["uid"]: {("Qwen3-8B", "bf16", "serving")}}
    assert _models(workload__uid=POD_B["uid"]) == {POD_B["uid"]: {("", "", "")}}
    assert _sums("model", kind="workload") == {"Qwen3-8B": Decimal("495.11"), "": Decimal("115.88")}


def test_a_model_name_rule_maps_a_workload_that_serves_that_model(world: dict[str, Any]) -> None:
    _served(world, MIXTRAL_HF, "fp8", [FULL])
    _rules(world, RuleInput("model_name", MIXTRAL_HF, model="Mixtral-8x7B", variant="fp8"))
    allocation_day_compute(day=DAY)
    assert _models(workload__uid=POD_A["uid"]) == {POD_A["uid"]: {("Mixtral-8x7B", "fp8", "model_name")}}
    assert _models(workload__uid=POD_B["uid"]) == {POD_B["uid"]: {("", "", "")}}
    # A rule naming a model without a variant gives no variant (it does not borrow the metrics').
    _rules(world, RuleInput("model_name", MIXTRAL_HF, model="Mixtral-8x7B"))
    allocation_day_compute(day=DAY)
    assert _models(workload__uid=POD_A["uid"]) == {POD_A["uid"]: {("Mixtral-8x7B", "", "model_name")}}


def test_a_label_rule_wins_over_the_model_name_rule(world: dict[str, Any]) -> None:
    Workload.objects.filter(uid=POD_A["uid"]).update(labels={"model": "mixtral-tuned"})
    _served(world, MIXTRAL_HF, "fp8", [FULL])
    _rules(
        world,
        RuleInput("model_name", MIXTRAL_HF, model="Mixtral-8x7B", variant="fp8"),
        RuleInput("label", "model=mixtral-tuned", model="Mixtral-8x7B", variant="fp8-tuned"),
    )
    allocation_day_compute(day=DAY)
    assert _models(workload__uid=POD_A["uid"]) == {POD_A["uid"]: {("Mixtral-8x7B", "fp8-tuned", "label")}}


def test_the_variant_with_the_most_tokens_is_the_one_served(world: dict[str, Any]) -> None:
    # Pod a's full GPU reports two variants: fp8 for 4 h at 3M tokens, bf16 for 20 h at 2M.
    _served(world, MIXTRAL_HF, "fp8", [FULL], hours=4, tokens=3_000_000)
    _served(world, MIXTRAL_HF, "bf16", [FULL], start=T0 + timedelta(hours=4), hours=20, tokens=2_000_000)
    allocation_day_compute(day=DAY)
    assert _models(workload__uid=POD_A["uid"]) == {POD_A["uid"]: {(MIXTRAL_HF, "fp8", "serving")}}


def test_metrics_on_another_gpu_another_host_or_at_another_time_give_no_model(world: dict[str, Any]) -> None:
    elsewhere = Host.objects.create(hostname="elsewhere-01", team=world["team"])
    # The idle GPU: nobody held it. The time-sliced GPU after 18:00: nobody held it then. The
    # full GPU's UUID reported by another host, and on the day before. The MIG GPU itself, whose
    # holders held its instances (a metric names the device a workload held: the instance).
    _served(world, "Qwen3-8B", "bf16", [IDLE])
    _served(world, "Qwen3-8B", "fp8", [TS], start=T0 + timedelta(hours=18), hours=6)
    _served(world, "Qwen3-8B", "int8", [FULL], host=elsewhere)
    _served(world, "Qwen3-8B", "int4", [FULL], start=T0 - timedelta(days=1))
    _served(world, "Qwen3-8B", "fp16", [MIG])
    allocation_day_compute(day=DAY)
    assert set(AllocationDaily.objects.values_list("model", "variant", "model_source")) == {("", "", "")}
    # Metrics on the time-sliced GPU from 11:00 to 12:00: pods a and b held it then; pod x, which
    # held it from 12:00 (where the last interval ends) to 18:00, served nothing.
    _served(world, "Qwen3-8B", "awq", [TS], start=T0 + timedelta(hours=11), hours=1)
    allocation_day_compute(day=DAY)
    models = _models(kind__in=["workload", "unattributed"])
    assert models[POD_A["uid"]] == models[POD_B["uid"]] == {("Qwen3-8B", "awq", "serving")}
    assert models[POD_X["uid"]] == {("", "", "")}


def test_mig_instance_uuids_in_accelerator_uuids_work(world: dict[str, Any]) -> None:
    # Pod b's 2-slice instance served Mixtral for its 12 h; pod a's 3-slice instance Qwen.
    _served(world, MIXTRAL_HF, "fp8", [MIG_2], hours=12)
    _served(world, "Qwen3-8B", "bf16", [MIG_3, FULL])
    allocation_day_compute(day=DAY)
    assert _models(workload__uid=POD_B["uid"]) == {POD_B["uid"]: {(MIXTRAL_HF, "fp8", "serving")}}
    assert _models(workload__uid=POD_A["uid"]) == {POD_A["uid"]: {("Qwen3-8B", "bf16", "serving")}}


def test_it_reads_the_served_models_of_a_day_in_one_query(world: dict[str, Any]) -> None:
    _served(world, MIXTRAL_HF, "fp8", [MIG_2], hours=12)
    _served(world, "Qwen3-8B", "bf16", [MIG_3, FULL])
    with CaptureQueriesContext(connection) as queries:
        allocation_day_compute(day=DAY)
    reads = [q["sql"] for q in queries.captured_queries if "serving_inferencemetric" in q["sql"]]
    assert len(reads) == 1


def _figures() -> set[tuple[Any, ...]]:
    return set(
        AllocationDaily.objects.values_list(
            "day", "accelerator_id", "kind", "workload_id", "team_id", "cost_allocation", "cost_usage",
            "energy_allocation_j", "energy_usage_j",
        )
    )  # fmt: skip


def test_reapplying_rules_with_a_new_model_name_rule_moves_cost_between_models_and_nothing_else(
    world: dict[str, Any],
) -> None:
    # Pod b is labelled Mixtral-8x7B fp8 by a rule; pod a serves Mixtral under the engine's name.
    Workload.objects.filter(uid=POD_B["uid"]).update(labels={"model": "mixtral"})
    _served(world, MIXTRAL_HF, "fp8", [FULL])
    label = RuleInput("label", "model=mixtral", model="Mixtral-8x7B", variant="fp8")
    _rules(world, label, note="v2")
    allocation_day_compute(day=DAY)
    figures, teams = _figures(), _sums("team__slug", kind="workload")
    day_total = sum(_sums("kind").values())
    assert _sums("model", kind="workload") == {
        "Mixtral-8x7B": Decimal("115.88"),
        MIXTRAL_HF: Decimal("495.11"),
    }

    _rules(world, label, RuleInput("model_name", MIXTRAL_HF, model="Mixtral-8x7B", variant="fp8"), note="v3")
    call_command("allocation", "recompute", "--from", DAY.isoformat(), "--to", DAY.isoformat())
    # Pod a's 495.11 USD moved to Mixtral-8x7B fp8; each line's cost, energy and team as they were.
    assert _sums("model", kind="workload") == {"Mixtral-8x7B": Decimal("610.99")}
    assert _models(workload__uid=POD_A["uid"]) == {POD_A["uid"]: {("Mixtral-8x7B", "fp8", "model_name")}}
    assert _models(workload__uid=POD_B["uid"]) == {POD_B["uid"]: {("Mixtral-8x7B", "fp8", "label")}}
    assert _figures() == figures
    assert (
        _sums("team__slug", kind="workload")
        == teams
        == {
            world["team"].slug: Decimal("495.11"),
            world["other_team"].slug: Decimal("115.88"),
        }
    )
    assert sum(_sums("kind").values()) == day_total == Decimal("1032.36")
    assert set(AllocationDaily.objects.values_list("rule_set__version", flat=True)) == {3}
