"""Bad input at the API is a 4xx naming the field, never a 500, and stores nothing.

Each case here was once a 500, accepted nonsense, or stored more than it should have."""

from __future__ import annotations

import gzip
from typing import Any

import orjson
import pytest
from django.test import Client, override_settings

from accelboard.benchmarks.models import BenchmarkRun

from .conftest import post_json, row_counts, run_payload, telemetry_payload

TELEMETRY = "/api/v1/telemetry"
RUNS = "/api/v1/runs"
DRIFT = "/api/v1/drift-metrics"


def _auth(token: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def _error(response: Any) -> dict[str, Any]:
    return response.json()["error"]


# --- Query parameters -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/api/v1/runs", "model"),
        ("/api/v1/runs", "variant"),
        ("/api/v1/runs", "accelerator"),
        ("/api/v1/runs", "branch"),
        ("/api/v1/series", "model"),
        ("/api/v1/series", "variant"),
        ("/api/v1/series", "accelerator"),
        ("/api/v1/series", "metric"),
        ("/api/v1/alerts", "state"),
        ("/api/v1/alerts", "kind"),
    ],
)
def test_a_nul_in_a_text_filter_is_a_4xx_naming_it(
    client: Client, team: Any, read_token: str, path: str, name: str
) -> None:
    response = client.get(f"{path}?{name}=a%00b", **_auth(read_token))
    assert response.status_code == 422, response.content
    assert (_error(response)["path"], _error(response)["code"]) == (name, "invalid")


@pytest.mark.parametrize("offset", ["+16:00", "+23:59", "-16:00", "+15:00"])
@pytest.mark.parametrize("name", ["since", "until"])
def test_a_utc_offset_beyond_the_earths_is_a_4xx(
    client: Client, team: Any, read_token: str, name: str, offset: str
) -> None:
    value = f"2025-01-01T00:00:00{offset}".replace("+", "%2B")
    response = client.get(f"/api/v1/runs?{name}={value}", **_auth(read_token))
    assert response.status_code == 422, response.content
    assert _error(response)["path"] == name


def test_real_utc_offsets_are_fine(client: Client, team: Any, read_token: str) -> None:
    for offset in ("%2B14:00", "-12:00", "%2B05:45", "Z"):
        response = client.get(f"/api/v1/runs?since=2025-01-01T00:00:00{offset}", **_auth(read_token))
        assert response.status_code == 200, (offset, response.content)


def test_telemetry_refuses_a_utc_offset_beyond_the_earths(
    client: Client, team: Any, ingest_token: str
) -> None:
    payload = telemetry_payload(n=2)
    payload["samples"][1]["time"] = "2025-11-29T22:10:00+16:00"
    before = row_counts()
    response = post_json(client, TELEMETRY, payload, ingest_token)
    assert response.status_code == 422, response.content
    assert _error(response)["path"] == "samples[1].time"
    assert row_counts() == before


# --- Sizes and depths ---------------------------------------------------------------------------


def _nested(depth: int) -> bytes:
    """``{"a": {"a": ... {}}}`` as JSON text: too deep for ``orjson.dumps`` (254) to write."""
    return b'{"a":' * depth + b"{}" + b"}" * depth


def _with_nested(payload: dict[str, Any], depth: int) -> bytes:
    return orjson.dumps(payload).replace(b'"@nested@"', _nested(depth))


@pytest.mark.parametrize("depth", [33, 300, 1000, 100_000])
def test_host_facts_nested_deep_are_a_422(client: Client, team: Any, ingest_token: str, depth: int) -> None:
    """Up to 100 levels of the body, the stored field's own limit (32) names the field; deeper,
    the body's limit names where the 101st level opens (``host.facts.a.a...``)."""
    payload = telemetry_payload(n=2)
    payload["host"]["facts"] = "@nested@"
    before = row_counts()
    response = post_json(client, TELEMETRY, None, ingest_token, raw=_with_nested(payload, depth))
    assert response.status_code == 422, response.content
    error = _error(response)
    assert error["code"] == "too_deep"
    if depth < 100:
        assert error["path"] == "host.facts"
    else:
        assert error["path"] == "host.facts" + ".a" * 98
        assert error["message"].startswith("nested deeper than 100 levels (line 1, character ")
    assert row_counts() == before


def test_host_facts_over_64_kib_are_refused_naming_the_field(
    client: Client, team: Any, ingest_token: str
) -> None:
    payload = telemetry_payload(n=2)
    payload["host"]["facts"] = {"notes": "x" * (64 * 1024)}
    before = row_counts()
    response = post_json(client, TELEMETRY, payload, ingest_token)
    assert response.status_code == 422, response.content
    assert (_error(response)["path"], _error(response)["code"]) == ("host.facts", "too_large")
    assert row_counts() == before


@pytest.mark.parametrize("depth", [33, 300, 1000, 100_000])
def test_a_run_context_nested_deep_is_a_422(client: Client, team: Any, rw_token: str, depth: int) -> None:
    raw = _with_nested(run_payload(context="@nested@"), depth)
    response = post_json(client, RUNS, None, rw_token, raw=raw, gzipped=depth > 1000)
    assert response.status_code == 422, response.content
    assert _error(response)["code"] == "too_deep"
    assert _error(response)["path"].startswith("context")


@pytest.mark.parametrize("endpoint", [RUNS, TELEMETRY, "/api/v1/inference-metrics"])
def test_a_body_of_brackets_only_is_a_422_not_a_500(
    client: Client, team: Any, rw_token: str, ingest_token: str, endpoint: str
) -> None:
    token = rw_token if endpoint == RUNS else ingest_token
    raw = b"[" * 100_000 + b"]" * 100_000
    response = post_json(client, endpoint, None, token, raw=raw, gzipped=True)
    assert response.status_code == 422, response.content
    assert _error(response)["code"] == "too_deep"
    assert _error(response)["path"] == "[0]" * 100


def test_a_body_broken_and_deep_is_still_the_400_of_malformed_json(
    client: Client, team: Any, ingest_token: str
) -> None:
    response = post_json(client, TELEMETRY, None, ingest_token, raw=b"[1,]" + b"[" * 2000)
    assert response.status_code == 400 and _error(response)["code"] == "malformed_json"


@pytest.mark.parametrize("raw", [b"\n", b"  ", b"1],[2", b"{}],[{}"])
@pytest.mark.parametrize("endpoint", [RUNS, TELEMETRY, "/api/v1/drift-metrics"])
def test_a_blank_body_or_one_that_closes_the_parser_s_wrappers_is_a_400(
    client: Client, team: Any, rw_token: str, raw: bytes, endpoint: str
) -> None:
    # Found by schemathesis: "\n" as the body was a 500 (the nesting-limited parse wraps the text
    # in brackets, and "[[\n]]" parses to an empty list); "1],[2" was read as 1.
    before = row_counts()
    response = post_json(client, endpoint, None, rw_token, raw=raw)
    assert response.status_code == 400, response.content
    assert _error(response)["code"] == "malformed_json"
    assert row_counts() == before


@pytest.mark.parametrize("where", ["context", "workload.options"])
def test_a_run_context_over_64_kib_is_refused(client: Client, team: Any, rw_token: str, where: str) -> None:
    payload = run_payload()
    big = {"log": "z" * (64 * 1024)}
    if where == "context":
        payload["context"] = big
    else:
        payload["workload"]["options"] = big
    before = row_counts()
    response = post_json(client, RUNS, payload, rw_token)
    assert response.status_code == 422, response.content
    assert (_error(response)["path"], _error(response)["code"]) == (where, "too_large")
    assert row_counts() == before


def test_an_upload_context_over_64_kib_is_refused(client: Client, team: Any, rw_token: str) -> None:
    data = {"file": _csv_file(), "context": "note=" + "z" * (64 * 1024)}
    before = row_counts()
    response = client.post(RUNS, data=data, **_auth(rw_token))
    assert response.status_code == 422, response.content
    assert (_error(response)["path"], _error(response)["code"]) == ("context", "too_large")
    assert row_counts() == before


def _csv_file() -> Any:
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile("results.csv", b"metric,value\nthroughput,1\n", content_type="text/csv")


# --- Values that make no sense ------------------------------------------------------------------


def test_a_negative_throughput_is_refused(client: Client, team: Any, rw_token: str) -> None:
    payload = run_payload()
    payload["metrics"][0]["value"] = -5.0
    before = row_counts()
    response = post_json(client, RUNS, payload, rw_token)
    assert response.status_code == 422, response.content
    assert _error(response)["path"] == "metrics[0].value"
    assert row_counts() == before


def test_a_negative_sample_of_a_throughput_is_refused(client: Client, team: Any, rw_token: str) -> None:
    payload = run_payload()
    payload["metrics"][0]["samples"] = [4800.0, -1.0]
    response = post_json(client, RUNS, payload, rw_token)
    assert response.status_code == 422, response.content
    assert _error(response)["path"] == "metrics[0].samples[1]"


def test_a_metric_that_may_be_negative_still_is(client: Client, team: Any, rw_token: str) -> None:
    payload = run_payload()
    payload["metrics"].append(
        {"name": "perplexity_delta", "value": -0.2, "unit": "score", "direction": "lower"}
    )
    response = post_json(client, RUNS, payload, rw_token)
    assert response.status_code == 201, response.content


def test_a_run_finished_before_it_started_is_refused(client: Client, team: Any, rw_token: str) -> None:
    payload = run_payload(started_at="2025-11-29T21:05:00Z", finished_at="2025-11-29T21:00:00Z")
    before = row_counts()
    response = post_json(client, RUNS, payload, rw_token)
    assert response.status_code == 422, response.content
    assert _error(response)["path"] == "finished_at"
    assert row_counts() == before
    assert not BenchmarkRun.objects.exists()


def test_drift_metrics_for_a_day_before_2000_are_refused(client: Client, team: Any, rw_token: str) -> None:
    item = {
        "model": "M",
        "variant": "int4",
        "day": "1970-01-01",
        "task": "chat",
        "agreement_rate": 0.9,
        "samples": 1,
    }
    response = post_json(client, DRIFT, {"batch_id": "d", "items": [item]}, rw_token)
    assert response.status_code == 422, response.content
    assert _error(response)["path"] == "items[0].day"


def test_gzip_with_trailing_garbage_is_a_400(client: Client, team: Any, ingest_token: str) -> None:
    raw = gzip.compress(orjson.dumps(telemetry_payload(n=2))) + b"garbage"
    before = row_counts()
    response = post_json(client, TELEMETRY, None, ingest_token, raw=raw, HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 400, response.content
    assert _error(response)["code"] == "bad_encoding"
    assert row_counts() == before


def test_gzip_of_several_members_is_read_whole(client: Client, team: Any, ingest_token: str) -> None:
    text = orjson.dumps(telemetry_payload(n=2))
    raw = gzip.compress(text[:10]) + gzip.compress(text[10:])
    response = post_json(client, TELEMETRY, None, ingest_token, raw=raw, HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 200, response.content


@pytest.mark.parametrize(
    ("text", "path"),
    [
        (b'{"batch_id": "a", "batch_id": "b", "host": {"hostname": "h"}}', "batch_id"),
        (b'{"batch_id": "a", "host": {"hostname": "h", "hostname": "i"}}', "host.hostname"),
        (
            b'{"batch_id": "a", "host": {"hostname": "h"}, "samples": [{"gpu": "g", "time": 1}, '
            b'{"gpu": "g", "time": 1, "power_w": 1, "power_w": 2}]}',
            "samples[1].power_w",
        ),
        (b'{"batch_id": "a", "host": {"hostname": "h", "facts": {"k\\u003a": 1, "k:": 2}}}', "host.facts.k:"),
    ],
)
def test_duplicate_json_keys_are_a_400_naming_the_key(
    client: Client, team: Any, ingest_token: str, text: bytes, path: str
) -> None:
    before = row_counts()
    response = post_json(client, TELEMETRY, None, ingest_token, raw=text)
    assert response.status_code == 400, response.content
    assert (_error(response)["code"], _error(response)["path"]) == ("duplicate_key", path)
    assert row_counts() == before


def test_colons_in_strings_are_not_mistaken_for_duplicate_keys(
    client: Client, team: Any, ingest_token: str
) -> None:
    payload = telemetry_payload(n=2)
    payload["host"]["facts"] = {"pci": "00000000:17:00.0", "a:b": "c:d", "esc": "x\u003ay"}
    payload["samples"][0]["time"] = "2025-11-29T22:10:00.123+01:00"
    response = post_json(client, TELEMETRY, payload, ingest_token)
    assert response.status_code == 200, response.content


# --- Unexpected errors ------------------------------------------------------------------------


@override_settings(DEBUG=False)
def test_an_unexpected_error_is_a_json_500_in_the_api_shape(
    team: Any, read_token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from accelboard.api import selectors

    def broken(**_: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(selectors, "run_list", broken)
    client = Client(raise_request_exception=False)
    response = client.get("/api/v1/runs", **_auth(read_token))
    assert response.status_code == 500
    assert response["Content-Type"].startswith("application/json")
    error = _error(response)
    assert error["code"] == "server_error"
    assert "boom" not in error["message"]  # no internals leak
    assert error["path"] == ""


@pytest.mark.parametrize("path", ["/api/v1/runs", "/api/v1/runs/1/profile"])
def test_a_multipart_body_without_a_boundary_is_a_400(
    client: Client, team: Any, rw_token: str, path: str
) -> None:
    response = client.generic("POST", path, b"--x\r\n", content_type="multipart/form-data", **_auth(rw_token))
    assert response.status_code == 400, response.content
    assert _error(response)["code"] == "malformed_body"


def test_a_profile_sent_as_json_is_a_415(client: Client, team: Any, rw_token: str) -> None:
    response = post_json(client, "/api/v1/runs/1/profile", {"profile": "x"}, rw_token)
    assert response.status_code == 415, response.content
