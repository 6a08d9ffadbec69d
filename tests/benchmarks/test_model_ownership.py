"""Models and variants owned by a team or shared: the migration's assignment of existing rows."""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

import pytest
from django.apps import apps
from django.db import connection

from accelboard.benchmarks.models import Model, ModelVariant
from accelboard.benchmarks.services import WorkloadSpec, model_variant_get_or_create, workload_get_or_create

pytestmark = pytest.mark.django_db

migration = importlib.import_module("accelboard.benchmarks.migrations.0003_model_variant_team")


def _used_by(team: Any, model: str, variant: str, precision: str = "bf16") -> ModelVariant:
    # As before the migration: every row shared (no team given), used through a team's workload.
    row = model_variant_get_or_create(model=model, variant=variant, precision=precision)
    workload_get_or_create(team=team, variant=row, spec=WorkloadSpec())
    return row


def test_the_migration_gives_single_team_rows_to_their_team_and_keeps_shared_ones_shared(
    team: Any, other_team: Any
) -> None:
    private = _used_by(team, "Inference-Only-7B", "bf16")
    shared_bf16 = _used_by(team, "Llama-3.1-8B", "bf16")
    _used_by(other_team, "Llama-3.1-8B", "bf16")
    their_int4 = _used_by(other_team, "Llama-3.1-8B", "int4-awq", "int4")
    unused = model_variant_get_or_create(model="Catalogue-Only", variant="fp16", precision="fp16")

    migration.owners_assign(apps, SimpleNamespace(connection=connection))

    owners = {(v.model.name, v.name): (v.model.team_id, v.team_id) for v in ModelVariant.objects.all()}
    assert owners == {
        ("Inference-Only-7B", "bf16"): (team.pk, team.pk),
        ("Llama-3.1-8B", "bf16"): (None, None),  # two teams use it, and it is the reference
        ("Llama-3.1-8B", "int4-awq"): (None, other_team.pk),
        ("Catalogue-Only", "fp16"): (None, None),
    }
    assert Model.objects.get(name="Llama-3.1-8B").reference_variant_id == shared_bf16.pk
    assert {private.pk, their_int4.pk, unused.pk} <= set(ModelVariant.objects.values_list("pk", flat=True))


def test_the_same_name_is_one_row_per_team_and_one_shared(team: Any, other_team: Any) -> None:
    shared = model_variant_get_or_create(model="Qwen3-8B", variant="bf16", precision="bf16")
    ours = model_variant_get_or_create(model="Mine-1B", variant="bf16", precision="bf16", team=team)
    theirs = model_variant_get_or_create(model="Mine-1B", variant="bf16", precision="bf16", team=other_team)
    assert ours.pk != theirs.pk and ours.model_id != theirs.model_id
    # A team writing a shared name joins the shared rows; asked again, the same rows come back.
    assert (
        model_variant_get_or_create(model="Qwen3-8B", variant="bf16", precision="bf16", team=team) == shared
    )
    assert model_variant_get_or_create(model="Mine-1B", variant="bf16", precision="bf16", team=team) == ours


def test_the_admin_lists_models_with_their_owner(team: Any, login_client: Any) -> None:
    from django.contrib.auth import get_user_model

    from tests.conftest import PASSWORD

    get_user_model().objects.create_superuser("root", "root@example.com", PASSWORD)
    admin = login_client(get_user_model().objects.get(username="root"))
    model_variant_get_or_create(model="Mine-1B", variant="bf16", precision="bf16", team=team)
    model_variant_get_or_create(model="Shared-1B", variant="bf16", precision="bf16")
    page = admin.get("/admin/benchmarks/model/?team__isempty=1")
    assert page.status_code == 200
    assert "Shared-1B" in page.content.decode() and "Mine-1B" not in page.content.decode()
    assert admin.get("/admin/benchmarks/modelvariant/").status_code == 200
