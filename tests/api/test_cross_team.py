"""No team reaches another's data through the write API: not by naming its GPUs, hosts, models or
run ids, and the answers to such attempts say no more than the answers to names nobody uses."""

from __future__ import annotations

import uuid
from typing import Any

from django.test import Client

from accelboard.benchmarks.models import BenchmarkRun, Model, ModelVariant
from accelboard.fleet.models import Host
from accelboard.serving.models import InferenceMetric

from .conftest import GPU_A, inference_payload, post_json, row_counts, run_payload, telemetry_payload

TELEMETRY = "/api/v1/telemetry"
INFERENCE = "/api/v1/inference-metrics"
RUNS = "/api/v1/runs"
DRIFT = "/api/v1/drift-metrics"
OTHER_GPU = "GPU-0ther000-0000-4000-8000-00000000000b"


def _telemetry(client: Client, token: str, hostname: str, gpus: list[str]) -> None:
    payload = telemetry_payload(n=0, hostname=hostname)
    payload["accelerators"] = [
        {"uuid": gpu, "index": i, "name": "NVIDIA H100 80GB HBM3"} for i, gpu in enumerate(gpus)
    ]
    response = post_json(client, TELEMETRY, payload, token)
    assert response.status_code == 200, response.content


def _private_run(client: Client, token: str, *, model: str, variant: str, precision: str) -> dict[str, Any]:
    payload = run_payload(
        model=model, variant={"name": variant, "precision": precision, "quantization_method": ""}
    )
    payload["hardware"] = {**payload["hardware"], "host": "", "gpu_uuids": [], "accelerator": ""}
    response = post_json(client, RUNS, payload, token)
    assert response.status_code == 201, response.content
    return payload


# --- GPUs -------------------------------------------------------------------------------------


def test_it_refuses_serving_metrics_naming_another_teams_gpu(
    client: Client, team: Any, other_team: Any, ingest_token: str, other_token: str
) -> None:
    _telemetry(client, ingest_token, "gpu-node-01", [GPU_A])
    _telemetry(client, other_token, "bravo-node-02", [OTHER_GPU])
    payload = inference_payload()
    payload["intervals"][0]["accelerator_uuids"] = [GPU_A, OTHER_GPU]
    before = row_counts()
    response = post_json(client, INFERENCE, payload, ingest_token)
    assert response.status_code == 409, response.content
    error = response.json()["error"]
    assert (error["code"], error["path"]) == ("accelerator_conflict", "intervals[0].accelerator_uuids[1]")
    assert "team" not in error["message"]
    assert row_counts() == before


def test_it_stores_serving_metrics_naming_the_teams_own_gpus_or_gpus_not_seen_yet(
    client: Client, team: Any, ingest_token: str
) -> None:
    _telemetry(client, ingest_token, "gpu-node-01", [GPU_A])
    payload = inference_payload()
    payload["intervals"][0]["accelerator_uuids"] = [GPU_A, "GPU-not-reported-yet"]
    response = post_json(client, INFERENCE, payload, ingest_token)
    assert response.status_code == 200, response.content
    assert InferenceMetric.objects.get().accelerator_uuids == [GPU_A, "GPU-not-reported-yet"]


# --- Hosts ------------------------------------------------------------------------------------


def test_a_mention_in_serving_metrics_takes_no_name_from_another_team(
    client: Client, team: Any, other_team: Any, ingest_token: str, other_token: str
) -> None:
    response = post_json(
        client, INFERENCE, {"batch_id": "b1", "host": "bravo-node-02", "intervals": []}, ingest_token
    )
    assert response.status_code == 200, response.content
    # The sender's own host of that name, not a name held for (or from) anyone else.
    assert Host.objects.get(hostname="bravo-node-02").team_id == team.pk
    # The other team's agent, with its own team's token, registers its own host of that name.
    _telemetry(client, other_token, "bravo-node-02", [OTHER_GPU])
    assert set(Host.objects.filter(hostname="bravo-node-02").values_list("team_id", flat=True)) == {
        team.pk,
        other_team.pk,
    }


def test_serving_metrics_answer_the_same_whoever_holds_the_host(
    client: Client, team: Any, other_team: Any, ingest_token: str, other_token: str
) -> None:
    _telemetry(client, other_token, "bravo-node-02", [OTHER_GPU])
    taken = post_json(client, INFERENCE, inference_payload(host="bravo-node-02", batch_id="b1"), ingest_token)
    free = post_json(
        client, INFERENCE, inference_payload(host="charlie-node-03", batch_id="b2"), ingest_token
    )
    assert taken.status_code == free.status_code == 200
    assert {k: v for k, v in taken.json().items() if k != "batch_id"} == {
        k: v for k, v in free.json().items() if k != "batch_id"
    }
    # The rows are the caller's own, on the caller's own host of that name; the other team's host
    # stays the other team's, its pages and costs never see them.
    assert set(InferenceMetric.objects.values_list("team_id", "host__team_id")) == {(team.pk, team.pk)}
    assert Host.objects.get(hostname="bravo-node-02", team=other_team).inference_metrics.count() == 0
    assert not InferenceMetric.objects.filter(team=other_team).exists()


def test_a_run_naming_a_host_does_not_claim_it(
    client: Client, team: Any, other_team: Any, ingest_token: str, other_token: str
) -> None:
    payload = run_payload()
    payload["hardware"]["host"] = "bravo-node-02"
    response = post_json(client, RUNS, payload, ingest_token)
    assert response.status_code == 201, response.content
    run = BenchmarkRun.objects.get(uuid=payload["run_id"])
    assert run.host is None
    assert run.context["host"] == "bravo-node-02"
    assert not Host.objects.filter(hostname="bravo-node-02").exists()
    _telemetry(client, other_token, "bravo-node-02", [OTHER_GPU])
    # ... and a run of the other team naming it answers as for any host the team does not have.
    other = run_payload()
    other["hardware"]["host"] = "bravo-node-02"
    assert post_json(client, RUNS, other, ingest_token).status_code == 201
    assert BenchmarkRun.objects.get(uuid=other["run_id"]).host is None


def test_a_run_naming_the_teams_own_host_links_it(client: Client, team: Any, ingest_token: str) -> None:
    _telemetry(client, ingest_token, "gpu-node-01", [GPU_A])
    payload = run_payload()
    assert post_json(client, RUNS, payload, ingest_token).status_code == 201
    assert BenchmarkRun.objects.get(uuid=payload["run_id"]).host.hostname == "gpu-node-01"


# --- Models and variants ------------------------------------------------------------------------


def test_a_run_on_another_teams_model_name_gets_its_own_model_and_variant(
    client: Client, team: Any, other_team: Any, ingest_token: str, other_token: str
) -> None:
    _private_run(client, other_token, model="Bravo-Secret-7B", variant="int4-q", precision="int4")
    theirs = ModelVariant.objects.get(model__name="Bravo-Secret-7B")
    assert (theirs.team_id, theirs.model.team_id) == (other_team.pk, other_team.pk)
    mine = _private_run(client, ingest_token, model="Bravo-Secret-7B", variant="int4-q", precision="int4")
    run = BenchmarkRun.objects.select_related("workload__variant__model").get(uuid=mine["run_id"])
    variant = run.workload.variant
    assert variant.pk != theirs.pk and variant.model_id != theirs.model_id
    assert (variant.team_id, variant.model.team_id) == (team.pk, team.pk)
    assert list(ModelVariant.objects.filter(model=theirs.model)) == [theirs]


def test_a_shared_model_keeps_each_teams_own_variants_apart(
    client: Client, team: Any, other_team: Any, ingest_token: str, other_token: str
) -> None:
    from accelboard.benchmarks.services import model_variant_get_or_create

    shared = model_variant_get_or_create(model="Llama-3.1-8B", variant="bf16", precision="bf16")
    assert shared.team_id is None and shared.model.team_id is None
    _private_run(client, other_token, model="Llama-3.1-8B", variant="int3-secret", precision="int4")
    _private_run(client, ingest_token, model="Llama-3.1-8B", variant="bf16", precision="bf16")
    model = Model.objects.get(name="Llama-3.1-8B")
    variants = {(v.name, v.team_id) for v in ModelVariant.objects.filter(model=model)}
    assert variants == {("bf16", None), ("int3-secret", other_team.pk)}
    # The shared model's reference stays a shared variant: never one team's private one.
    assert model.reference_variant_id == shared.pk


def test_drift_metrics_for_another_teams_variant_answer_as_for_an_unknown_one(
    client: Client, team: Any, other_team: Any, ingest_token: str, other_token: str
) -> None:
    _private_run(client, other_token, model="Bravo-Secret-7B", variant="int4-q", precision="int4")

    def drift(model: str, batch: str) -> Any:
        item = {"model": model, "variant": "int4-q", "day": "2026-03-01", "task": "chat",
                "agreement_rate": 0.97, "samples": 10}  # fmt: skip
        return post_json(client, DRIFT, {"batch_id": batch, "items": [item]}, ingest_token)

    before = row_counts()
    theirs, nobodys = drift("Bravo-Secret-7B", "d1"), drift("Nobody-Uses-This", "d2")
    assert theirs.status_code == nobodys.status_code == 422, theirs.content
    assert theirs.json()["error"]["code"] == nobodys.json()["error"]["code"] == "unknown_variant"
    assert theirs.json()["error"]["message"].replace("Bravo-Secret-7B", "X") == nobodys.json()["error"][
        "message"
    ].replace("Nobody-Uses-This", "X")
    assert row_counts() == before
    # The owner's own write goes through.
    item = {"model": "Bravo-Secret-7B", "variant": "int4-q", "day": "2026-03-01", "task": "chat",
            "agreement_rate": 0.97, "samples": 10}  # fmt: skip
    assert post_json(client, DRIFT, {"batch_id": "d3", "items": [item]}, other_token).status_code == 200


def test_serving_metrics_on_another_teams_variant_do_not_use_it(
    client: Client, team: Any, other_team: Any, ingest_token: str, other_token: str
) -> None:
    _private_run(client, other_token, model="Bravo-Secret-7B", variant="int4-q", precision="int4")
    _telemetry(client, ingest_token, "gpu-node-01", [GPU_A])
    payload = inference_payload()
    payload["intervals"][0].update(model="Bravo-Secret-7B", variant="int4-q")
    assert post_json(client, INFERENCE, payload, ingest_token).status_code == 200
    row = InferenceMetric.objects.select_related("variant__model").get()
    assert (row.variant.team_id, row.variant.model.team_id) == (team.pk, team.pk)
    # A name that states no precision is unknown to the team, whoever else uses it.
    _private_run(client, other_token, model="Bravo-Secret-7B", variant="mystery", precision="int4")
    payload = inference_payload(batch_id="b2")
    payload["intervals"][0].update(model="Bravo-Secret-7B", variant="mystery")
    response = post_json(client, INFERENCE, payload, ingest_token)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "unknown_variant"


# --- Run ids ----------------------------------------------------------------------------------


def test_a_run_id_taken_elsewhere_is_refused_without_saying_by_whom(
    client: Client, team: Any, other_team: Any, ingest_token: str, other_token: str
) -> None:
    run_id = str(uuid.uuid4())
    assert post_json(client, RUNS, run_payload(run_id=run_id), other_token).status_code == 201
    before = row_counts()
    response = post_json(client, RUNS, run_payload(run_id=run_id), ingest_token)
    assert response.status_code == 409
    error = response.json()["error"]
    assert (error["code"], error["path"]) == ("run_conflict", "run_id")
    assert "team" not in error["message"]
    assert row_counts() == before


def test_telemetry_conflicts_do_not_say_whose(
    client: Client, team: Any, other_team: Any, ingest_token: str, other_token: str
) -> None:
    _telemetry(client, other_token, "bravo-node-02", [OTHER_GPU])
    # Another team's host name is no conflict at all (tests/api/test_host_names.py); its GPU is.
    host = post_json(client, TELEMETRY, telemetry_payload(n=0, hostname="bravo-node-02"), ingest_token)
    assert host.status_code == 200, host.content
    gpu_payload = telemetry_payload(n=0, hostname="gpu-node-01")
    gpu_payload["accelerators"][0]["uuid"] = OTHER_GPU
    gpu = post_json(client, TELEMETRY, gpu_payload, ingest_token)
    assert gpu.status_code == 409
    assert "team" not in gpu.json()["error"]["message"]
