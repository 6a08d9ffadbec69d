"""The served OpenAPI schema is valid and complete: every ``$ref`` resolves, every request body is
described (the telemetry batch too), the contract's own example payloads validate against it, and
a run is named the same way (``run_id``: UUID, or its number) in every path."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema_rs
import pytest
from django.contrib.auth.models import AnonymousUser
from django.http import HttpResponse
from django.test import Client, RequestFactory

from accelboard.api.errors import docs_login_required

from .conftest import inference_payload, run_payload, telemetry_payload

DRIFT = {"batch_id": "d1", "items": [{"model": "M", "variant": "int4", "day": "2026-03-01", "task": "chat",
                                      "agreement_rate": 0.97, "samples": 10}]}  # fmt: skip


@pytest.fixture
def schema(client: Client, db: None) -> dict[str, Any]:
    response = client.get("/api/v1/openapi.json")
    assert response.status_code == 200
    return response.json()


def test_every_ref_resolves(schema: dict[str, Any]) -> None:
    components = schema["components"]["schemas"]
    refs = set(re.findall(r'"\$ref": "([^"]+)"', json.dumps(schema)))
    assert refs
    for ref in refs:
        assert ref.startswith("#/components/schemas/") and ref.rsplit("/", 1)[1] in components, ref


def _body_validator(schema: dict[str, Any], path: str, content: str = "application/json") -> Any:
    body = schema["paths"][path]["post"]["requestBody"]["content"][content]["schema"]
    return jsonschema_rs.validator_for({**body, "components": schema["components"]})


@pytest.mark.parametrize(
    ("path", "payload"),
    [
        ("/api/v1/telemetry", telemetry_payload(n=4)),
        ("/api/v1/runs", run_payload()),
        ("/api/v1/inference-metrics", inference_payload()),
        ("/api/v1/drift-metrics", DRIFT),
    ],
)
def test_each_request_body_is_described_and_the_examples_fit(
    schema: dict[str, Any], path: str, payload: Any
) -> None:
    validator = _body_validator(schema, path)
    errors = [error.message for error in validator.iter_errors(payload)]
    assert errors == []
    assert not validator.is_valid({**payload, "unknown_field": 1})  # bodies are strict


def test_the_telemetry_body_is_more_than_an_object(schema: dict[str, Any]) -> None:
    validator = _body_validator(schema, "/api/v1/telemetry")
    payload = telemetry_payload(n=2)
    payload["samples"][0]["power_w"] = "four hundred"
    assert not validator.is_valid(payload)
    assert not validator.is_valid({"batch_id": "b"})  # host is required


def test_a_run_is_named_by_run_id_everywhere(schema: dict[str, Any]) -> None:
    for path in ("/api/v1/runs/{run_id}", "/api/v1/runs/{run_id}/profile"):
        operation = next(iter(schema["paths"][path].values()))
        (parameter,) = [p for p in operation["parameters"] if p["in"] == "path"]
        assert parameter["name"] == "run_id" and parameter["schema"]["type"] == "string"
        pattern = re.compile(parameter["schema"]["pattern"])
        assert pattern.match("2f0c1a2b-0000-4000-8000-000000000001") and pattern.match("42")


def test_a_run_is_read_by_its_uuid_or_its_number(client: Client, team: Any, rw_token: str) -> None:
    from .conftest import post_json

    payload = run_payload(hardware={"accelerator": "", "host": ""})
    created = post_json(client, "/api/v1/runs", payload, rw_token).json()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {rw_token}"}
    by_uuid = client.get(f"/api/v1/runs/{payload['run_id']}", **auth)
    by_number = client.get(f"/api/v1/runs/{created['id']}", **auth)
    assert by_uuid.status_code == by_number.status_code == 200
    assert by_uuid.json() == by_number.json()
    assert client.get("/api/v1/runs/00000000-0000-4000-8000-000000000000", **auth).status_code == 404


def test_the_docs_can_require_a_login() -> None:
    def view(request: Any) -> HttpResponse:
        return HttpResponse("schema")

    guarded = docs_login_required(view)
    anonymous = RequestFactory().get("/api/v1/openapi.json")
    anonymous.user = AnonymousUser()
    response = guarded(anonymous)
    assert response.status_code == 401 and json.loads(response.content)["error"]["code"] == "unauthenticated"
    page = RequestFactory().get("/api/v1/docs")
    page.user = AnonymousUser()
    assert guarded(page).status_code == 302

    class User:
        is_authenticated = True

    signed_in = RequestFactory().get("/api/v1/openapi.json")
    signed_in.user = User()
    assert guarded(signed_in).content == b"schema"
