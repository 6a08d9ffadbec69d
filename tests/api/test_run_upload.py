"""POST /api/v1/runs as multipart: result files in, runs with their baselines out, all or none."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from accelboard.benchmarks.models import BenchmarkRun, MetricValue
from tests.factories import H100, L4, accelerator_type_from

from .conftest import row_counts

URL = "/api/v1/runs"
FIXTURES = Path(__file__).resolve().parents[1] / "importers" / "fixtures"


@pytest.fixture(autouse=True)
def media(settings: Any, tmp_path: Path, db: None) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    accelerator_type_from(H100)
    accelerator_type_from(L4)
    return settings.MEDIA_ROOT


def _upload(client: Client, token: str | None, files: list[tuple[str, bytes]], **fields: str) -> Any:
    data: dict[str, Any] = dict(fields)
    data["file"] = [_named(name, content) for name, content in files]
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    return client.post(URL, data=data, **headers)


def _named(name: str, content: bytes) -> io.BytesIO:
    handle = io.BytesIO(content)
    handle.name = name
    return handle


def _fixture(name: str) -> tuple[str, bytes]:
    return name, (FIXTURES / name).read_bytes()


def _vllm_with_throughput(value: float, tag: str) -> tuple[str, bytes]:
    data = json.loads((FIXTURES / "vllm_2025.json").read_bytes())
    data["output_throughput"] = value
    data["tag"] = tag  # another file, same series
    return f"vllm-{tag}.json", json.dumps(data).encode()


def test_it_imports_a_file_with_form_fields(client: Client, team: Any, rw_token: str) -> None:
    response = _upload(
        client,
        rw_token,
        [_fixture("vllm_2025.json")],
        accelerator="H100 SXM 80GB",
        count="2",
        commit="abc1234",
        branch="feature/x",
        ci_url="https://ci.example.com/9",
        context="batch_size=16\nowner=perf-team\n",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["duplicate"] is False
    (item,) = body["runs"]
    run = BenchmarkRun.objects.get(pk=item["id"])
    assert (run.team, run.git_commit, run.branch, run.ci_url) == (
        team,
        "abc1234",
        "feature/x",
        "https://ci.example.com/9",
    )
    assert (run.accelerator_type.name, run.accelerator_count, run.uploaded_via) == ("H100 SXM 80GB", 2, "api")
    assert run.workload.batch_size == 16
    assert run.context["owner"] == "perf-team"
    assert run.field_sources["workload.batch_size"] == "user"
    assert item["url"] == f"/runs/{run.pk}/" and item["source_format"] == "vllm-serving"
    assert len(item["metrics"]) == MetricValue.objects.filter(run=run).count() == 25
    throughput = next(m for m in item["metrics"] if m["name"] == "throughput_tokens_per_s")
    # First result of its series: no baseline, no verdict yet.
    assert (throughput["baseline"], throughput["delta_pct"], throughput["verdict"]) == (None, None, "new")


def test_the_scenario_field_states_how_the_load_was_offered(client: Client, team: Any, rw_token: str) -> None:
    # The multipart form takes the scenario as the JSON body does (the OpenAPI form lists it);
    # like the other fields it applies over what the file says (server, from its request rate).
    response = _upload(client, rw_token, [_fixture("vllm_2025.json")], accelerator="L4", scenario="serving")
    assert response.status_code == 201, response.content
    run = BenchmarkRun.objects.get(pk=response.json()["runs"][0]["id"])
    assert run.workload.scenario == "serving" and run.field_sources["workload.scenario"] == "user"
    form = client.get("/api/v1/openapi.json").json()["paths"]["/api/v1/runs"]["post"]["requestBody"]
    assert "server" in form["content"]["multipart/form-data"]["schema"]["properties"]["scenario"]["enum"]


def test_it_compares_each_metric_with_its_series_baseline(client: Client, team: Any, rw_token: str) -> None:
    for i, value in enumerate([1000.0, 1010.0, 990.0, 1005.0, 995.0]):
        name, data = _vllm_with_throughput(value, f"seed{i}")
        assert _upload(client, rw_token, [(name, data)], accelerator="H100 SXM 80GB").status_code == 201
    response = _upload(client, rw_token, [_vllm_with_throughput(800.0, "new")], accelerator="H100 SXM 80GB")
    assert response.status_code == 201, response.content
    throughput = next(
        m for m in response.json()["runs"][0]["metrics"] if m["name"] == "throughput_tokens_per_s"
    )
    assert throughput["baseline"] == 1000.0  # median of 1000, 1010, 990, 1005, 995
    assert throughput["baseline_points"] == 5
    assert throughput["delta_pct"] == pytest.approx(-20.0)
    # Five results are too short a history for the detector to call one result a regression.
    assert throughput["verdict"] == "none"
    assert "baseline too short" in throughput["reason"]


def test_it_answers_a_retry_with_the_same_run(client: Client, team: Any, rw_token: str) -> None:
    files = [_fixture("vllm_2025.json")]
    first = _upload(client, rw_token, files, accelerator="H100 SXM 80GB")
    second = _upload(client, rw_token, files, accelerator="H100 SXM 80GB")
    assert (first.status_code, second.status_code) == (201, 200)
    assert second.json()["duplicate"] is True
    assert first.json()["runs"][0]["id"] == second.json()["runs"][0]["id"]
    assert BenchmarkRun.objects.count() == 1


def test_it_imports_an_archive_of_several_files(client: Client, team: Any, rw_token: str) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(FIXTURES / "mlperf", arcname="mlperf")
        archive.add(FIXTURES / "lm_eval_v04.json", arcname="lm_eval_v04.json")
    response = _upload(client, rw_token, [("results.tar.gz", buffer.getvalue())])
    assert response.status_code == 201, response.content
    formats = {item["source_format"] for item in response.json()["runs"]}
    assert formats == {"mlperf-inference", "lm-eval"}
    assert BenchmarkRun.objects.count() == len(response.json()["runs"])


@pytest.mark.parametrize(
    ("files", "fields", "status", "path", "words"),
    [
        ([("notes.txt", b"hello world\n")], {}, 422, "file[0]", "unrecognised format"),
        ([("vllm.json", b'{"backend": "vllm", "date": ')], {}, 422, "file[0]", "vllm.json"),
        ([("vllm_2025.json", None)], {}, 422, "accelerator", "accelerator"),
        ([("vllm_2025.json", None)], {"accelerator": "Potato 9000"}, 422, "accelerator", "Potato 9000"),
        (
            [("vllm_2025.json", None)],
            {"accelerator": "L4", "count": "x"},
            422,
            "count",
            "count: expected a number",
        ),
        ([("vllm_2025.json", None)], {"accelerator": "L4", "colour": "red"}, 422, "colour", "unknown field"),
        ([("vllm_2025.json", None)], {"accelerator": "L4", "context": "oops"}, 422, "context", "line 1"),
        ([("nvidia_smi_multi.csv", None)], {"model": "m", "precision": "bf16"}, 422, "format", "telemetry"),
        ([("vllm_2025.json", None)], {"accelerator": "L4", "scenario": "warp"}, 422, "scenario", "warp"),
    ],
)
def test_it_rejects_bad_uploads_naming_the_field(
    client: Client, team: Any, rw_token: str, files: Any, fields: Any, status: int, path: str, words: str
) -> None:
    files = [(name, data if data is not None else (FIXTURES / name).read_bytes()) for name, data in files]
    before = row_counts()
    response = _upload(client, rw_token, files, **fields)
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert error["path"] == path
    assert words in error["message"]
    assert row_counts() == before


def test_it_stores_nothing_when_one_file_of_many_fails(client: Client, team: Any, rw_token: str) -> None:
    before = row_counts()
    response = _upload(
        client, rw_token, [_fixture("vllm_2025.json"), _fixture("optimum_benchmark.json")], accelerator="L4"
    )
    # The uploader's L4 applies to both files; optimum-benchmark's model, the base Llama-2-7B, is
    # close to the catalogue's chat model but not it: the whole upload is refused until one is picked.
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["path"] == "model" and "TheBloke/Llama-2-7B-AWQ" in error["message"]
    assert "Llama-2-7B-Chat" in error["message"]
    assert row_counts() == before


def _stored_files(media: Path) -> list[Path]:
    return sorted(path for path in media.rglob("*") if path.is_file()) if media.exists() else []


def test_it_keeps_no_file_of_a_refused_upload(client: Client, team: Any, rw_token: str, media: Path) -> None:
    # The first file is read and stored before the second is refused: its copy goes with its row.
    response = _upload(
        client, rw_token, [_fixture("vllm_2025.json"), _fixture("optimum_benchmark.json")], accelerator="L4"
    )
    assert response.status_code == 422
    assert _stored_files(media) == []


def test_it_keeps_no_file_when_the_profile_of_an_upload_is_refused(
    client: Client, team: Any, rw_token: str, media: Path
) -> None:
    before = row_counts()
    data = {
        "accelerator": "L4",
        "file": [_named(*_fixture("vllm_2025.json"))],
        "profile": [_named("trace.json", b"{")],
    }
    response = client.post(URL, data=data, HTTP_AUTHORIZATION=f"Bearer {rw_token}")
    assert response.status_code == 422, response.content
    assert response.json()["error"]["path"] == "profile"
    assert row_counts() == before
    assert _stored_files(media) == []


def test_it_requires_a_file_and_a_write_token(
    client: Client, team: Any, rw_token: str, read_token: str
) -> None:
    response = client.post(URL, data={"branch": "main"}, HTTP_AUTHORIZATION=f"Bearer {rw_token}")
    assert response.status_code == 422 and response.json()["error"]["path"] == "file"
    assert _upload(client, read_token, [_fixture("vllm_2025.json")], accelerator="L4").status_code == 403
    assert _upload(client, None, [_fixture("vllm_2025.json")], accelerator="L4").status_code == 401
    assert _upload(client, "x" * 40, [_fixture("vllm_2025.json")], accelerator="L4").status_code == 401
    assert not BenchmarkRun.objects.exists()


def test_it_keeps_a_run_id_for_a_single_run(
    client: Client, team: Any, rw_token: str, other_token: str
) -> None:
    run_id = "6f1f0a52-5a4e-4f53-9d55-1a2b3c4d5e6f"
    response = _upload(client, rw_token, [_fixture("vllm_2025.json")], accelerator="L4", run_id=run_id)
    assert response.status_code == 201
    assert response.json()["runs"][0]["run_id"] == run_id
    taken = _upload(client, other_token, [_fixture("vllm_2025.json")], accelerator="L4", run_id=run_id)
    assert taken.status_code == 409 and taken.json()["error"]["path"] == "run_id"
    many = _upload(client, rw_token, [_fixture("pytest_benchmark.json")], accelerator="L4", run_id=run_id)
    assert many.status_code == 422 and many.json()["error"]["path"] == "run_id"
