"""Host names holding control or format characters (U+202E shows ``gpu-node-7`` reversed) are
refused wherever a host name comes in: the agent's telemetry, serving batches, run uploads (a
JSON run, a form's context, a result file) and remote-write labels (the series alone)."""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from accelboard.fleet.models import Host, PrometheusUnknownMetric, TelemetrySample
from accelboard.importers.base import ParseError
from accelboard.importers.hostnames import hostname_problem
from accelboard.importers.registry import parse_bytes
from tests.api.conftest import inference_payload, post_json, row_counts, run_payload, telemetry_payload
from tests.factories import H100, accelerator_type_from
from tests.fleet.prom_wire import snappy, write_request

FIXTURES = Path(__file__).resolve().parents[1] / "importers" / "fixtures"
RLO = "gpu-node-\u202e7"


@pytest.mark.parametrize(
    ("name", "words"),
    [
        (RLO, "U+202E (RIGHT-TO-LEFT OVERRIDE), a format character, at position 9"),
        ("gpu\u200b1", "U+200B (ZERO WIDTH SPACE), a format character"),
        ("gpu\n1", "U+000A, a control character"),
        ("gpu\x1b[31m", "U+001B, a control character"),
        ("gpu\u2028", "U+2028 (LINE SEPARATOR), a line separator"),
        ("gpu\ufeff", "U+FEFF (ZERO WIDTH NO-BREAK SPACE), a format character"),
    ],
)
def test_control_and_format_characters_are_named(name: str, words: str) -> None:
    problem = hostname_problem(name)
    assert problem is not None and words in problem


@pytest.mark.parametrize("name", ["gpu-node-01", "ip-10-0-0-7.ec2.internal", "nœud-größe-7", "ノード7", ""])
def test_ordinary_names_pass(name: str) -> None:
    assert hostname_problem(name) is None


def _refused(response: Any, path: str) -> None:
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert error["path"] == path and "U+202E" in error["message"], error


def test_telemetry_refuses_the_host_name(client: Client, team: Any, ingest_token: str) -> None:
    before = row_counts()
    response = post_json(client, "/api/v1/telemetry", telemetry_payload(n=2, hostname=RLO), ingest_token)
    _refused(response, "host.hostname")
    assert row_counts() == before and not Host.objects.exists()


def test_serving_batches_refuse_the_host_name(client: Client, team: Any, ingest_token: str) -> None:
    before = row_counts()
    response = post_json(client, "/api/v1/inference-metrics", inference_payload(host=RLO), ingest_token)
    _refused(response, "host")
    assert row_counts() == before


def test_a_json_run_refuses_the_host_name(client: Client, team: Any, rw_token: str) -> None:
    payload = run_payload()
    payload["hardware"]["host"] = RLO
    before = row_counts()
    _refused(post_json(client, "/api/v1/runs", payload, rw_token), "hardware.host")
    assert row_counts() == before


def _upload(client: Client, token: str, name: str, content: bytes, **fields: str) -> Any:
    handle = io.BytesIO(content)
    handle.name = name
    return client.post(
        "/api/v1/runs", data={"file": [handle], **fields}, HTTP_AUTHORIZATION=f"Bearer {token}"
    )


def test_an_upload_refuses_the_host_in_its_context(client: Client, team: Any, rw_token: str) -> None:
    accelerator_type_from(H100)
    before = row_counts()
    content = (FIXTURES / "vllm_2025.json").read_bytes()
    response = _upload(
        client, rw_token, "vllm_2025.json", content, accelerator="H100 SXM 80GB", context=f"host={RLO}"
    )
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert error["path"] == "host" and "U+202E" in error["message"]
    assert row_counts() == before


def test_a_result_file_naming_such_a_host_is_a_parse_error() -> None:
    text = (FIXTURES / "aiperf" / "profile_export_aiperf.json").read_text()
    assert '"hostname": "gpu-node-7"' in text
    content = text.replace('"hostname": "gpu-node-7"', '"hostname": "gpu-node-\\u202e7"').encode()
    with pytest.raises(ParseError, match=r"key 'hardware.host': the host name holds U\+202E"):
        parse_bytes(content, filename="profile_export_aiperf.json")


# --- Prometheus remote-write: the series is refused and counted, the rest stored ----------------

URL = "/api/v1/prometheus/write"


def _post(client: Client, series: list[tuple[dict[str, str], list]], token: str) -> Any:
    return client.post(
        URL,
        data=snappy(write_request(series)),
        content_type="application/x-protobuf",
        HTTP_CONTENT_ENCODING="snappy",
        HTTP_X_PROMETHEUS_REMOTE_WRITE_VERSION="0.1.0",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )


def test_remote_write_refuses_the_series_of_such_a_host_and_stores_the_others(
    client: Client, team: Any, ingest_token: str
) -> None:
    now = int(time.time() * 1000) - 10_000
    good = {"UUID": "GPU-ok-1", "Hostname": "prom-node-01", "gpu": "0"}
    bad = {"UUID": "GPU-bad-1", "Hostname": RLO, "gpu": "0"}
    series = [
        ({"__name__": "DCGM_FI_DEV_POWER_USAGE", **good}, [(now, 300.0)]),
        ({"__name__": "DCGM_FI_DEV_POWER_USAGE", **bad}, [(now, 300.0), (now + 1000, 301.0)]),
        ({"__name__": "DCGM_FI_DEV_GPU_UTIL", **bad}, [(now, 90.0)]),
    ]
    response = _post(client, series, ingest_token)
    assert response.status_code == 200, response.content
    assert response.json()["refused"] == 3 and response.json()["stored"] == 1
    assert list(Host.objects.values_list("hostname", flat=True)) == ["prom-node-01"]
    assert TelemetrySample.objects.count() == 1
    counted = dict(PrometheusUnknownMetric.objects.values_list("name", "samples"))
    assert counted == {
        "DCGM_FI_DEV_POWER_USAGE (refused: its Hostname label holds a control or format character)": 2,
        "DCGM_FI_DEV_GPU_UTIL (refused: its Hostname label holds a control or format character)": 1,
    }


def test_remote_write_refuses_a_serving_series_whose_instance_names_such_a_host(
    client: Client, team: Any, ingest_token: str
) -> None:
    now = int(time.time() * 1000) - 10_000
    labels = {"model_name": "meta-llama/Llama-3.1-8B-Instruct", "instance": f"{RLO}:8000", "job": "vllm"}
    series = [({"__name__": "vllm:generation_tokens_total", **labels}, [(now, 10.0), (now + 15_000, 20.0)])]
    response = _post(client, series, ingest_token)
    assert response.status_code == 200, response.content
    assert response.json()["refused"] == 2
    assert not Host.objects.exists()
    counted = dict(PrometheusUnknownMetric.objects.values_list("name", "samples"))
    assert counted == {
        "vllm:generation_tokens_total (refused: its instance label holds a control or format character)": 2
    }
