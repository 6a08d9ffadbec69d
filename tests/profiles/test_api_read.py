"""``GET /api/v1/runs/{run_id}/profile``: the stored profile with its HTA-style analyses and
warnings, the verdict read with the run window's counters, in the documented OpenAPI shape."""

from __future__ import annotations

import io
from typing import Any

import jsonschema_rs
import pytest
from django.test import Client

from accelboard.profiles.models import Profile
from accelboard.profiles.services import profile_attach
from accelboard.testing.traces import KERNELS, write_training_trace

pytestmark = pytest.mark.django_db


def _trace(**options: Any) -> bytes:
    buffer = io.BytesIO()
    write_training_trace(buffer, **options)
    return buffer.getvalue()


@pytest.fixture
def answer_schema(client: Client) -> Any:
    schema = client.get("/api/v1/openapi.json").json()
    operation = schema["paths"]["/api/v1/runs/{run_id}/profile"]["get"]
    body = operation["responses"]["200"]["content"]["application/json"]["schema"]
    return jsonschema_rs.validator_for({**body, "components": schema["components"]})


def test_it_answers_the_hta_results_warnings_and_the_counters_verdict(
    profiled_run: dict[str, Any],
    read_token: str,
    answer_schema: Any,
    django_assert_max_num_queries: Any,
) -> None:
    run = profiled_run["run"]
    # L4 traces on an H100 run: attached with a warning; rank 1 is slow, the straggler.
    files = [
        ("rank0.json", _trace(rank=0, world_size=2, device="NVIDIA L4")),
        ("rank1.json", _trace(rank=1, world_size=2, device="NVIDIA L4", slow={KERNELS[0][0]: 3.0})),
    ]
    stored = profile_attach(run=run, files=files)
    stored.refresh_from_db()
    assert stored.warnings and "L4" in stored.warnings[0]
    with django_assert_max_num_queries(8):
        response = Client().get(f"/api/v1/runs/{run.uuid}/profile", HTTP_AUTHORIZATION=f"Bearer {read_token}")
    assert response.status_code == 200, response.content
    body = response.json()
    assert [e.message for e in answer_schema.iter_errors(body)] == []
    assert (body["id"], body["run_id"], body["ranks"]) == (run.pk, str(run.uuid), 2)
    assert body["profile_url"] == f"/runs/{run.pk}/profile/"
    assert body["warnings"] == stored.warnings and body["findings"] == stored.findings
    hta = body["hta"]
    assert hta["ranks"]["straggler_rank"] == 1 and hta["ranks"]["collectives_matched"] == 6
    assert hta["idle"] == stored.hta["idle"] and hta["launch"] == stored.hta["launch"]
    # per step: each rank's three steps, whose busy and idle time add up to the step's window
    assert [len(item["rows"]) for item in hta["steps"]] == [3, 3]
    for item in hta["steps"]:
        for row in item["rows"]:
            assert row["busy_us"] + row["idle_us"] == pytest.approx(row["span_us"])
    # GPU 0's tensor pipes at 25.5% and DRAM at 10-24%: neither busy, said by the counters.
    assert body["counters"]["tensor_active"] == pytest.approx(25.5) and body["counters"]["bound"] == "neither"
    assert body["verdict"]["counters"]["bound"] == "neither"
    assert body["verdict"]["kind"] == stored.verdict_kind or body["verdict"]["counters"]["changed"]


def test_without_counters_the_verdict_is_the_stored_one(
    profiled_run: dict[str, Any], read_token: str
) -> None:
    run = profiled_run["run"]
    Profile.objects.filter(run=run).delete()
    run.finished_at = None  # no window: no counters
    run.save(update_fields=["finished_at"])
    stored = profile_attach(run=run, files=[("rank0.json", _trace())])
    stored.refresh_from_db()
    body = Client().get(f"/api/v1/runs/{run.pk}/profile", HTTP_AUTHORIZATION=f"Bearer {read_token}").json()
    verdict = body["verdict"]
    assert body["counters"] is None and verdict.pop("counters") is None
    assert verdict == stored.verdict and verdict["kind"] == "compute-bound"
    assert any("no hardware counters" in item for item in verdict["unknown"])
    assert body["hta"]["ranks"] is None
    assert (
        body["warnings"]
        == stored.warnings
        == ["The trace's world size is 1 devices, but this run used 2 accelerators"]
    )


def test_another_teams_run_and_a_run_without_profile_are_404(
    profiled_run: dict[str, Any],
    make_token: Any,
    other_team: Any,
    read_token: str,
) -> None:
    run = profiled_run["run"]
    response = Client().get(f"/api/v1/runs/{run.pk}/profile", HTTP_AUTHORIZATION=f"Bearer {read_token}")
    assert response.status_code == 404  # no profile yet
    profile_attach(run=run, files=[("rank0.json", _trace())])
    other = make_token(other_team, "read")
    response = Client().get(f"/api/v1/runs/{run.pk}/profile", HTTP_AUTHORIZATION=f"Bearer {other}")
    assert response.status_code == 404
    assert Client().get(f"/api/v1/runs/{run.pk}/profile").status_code == 401
