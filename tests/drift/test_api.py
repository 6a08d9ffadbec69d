"""POST /api/v1/drift-metrics: production agreement per variant and day; token auth, strict
schema with the failing field named, idempotent batches, nothing half-written."""

from __future__ import annotations

from copy import deepcopy
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from django.test import Client

from accelboard.api.services import token_create
from accelboard.drift.models import AgreementBatch, ProductionAgreement

from .conftest import START, accuracy_run

URL = "/api/v1/drift-metrics"


@pytest.fixture
def variants(team: Any) -> None:
    for name, precision in (("bf16", "bf16"), ("int4-awq", "int4")):
        accuracy_run(
            team=team,
            model="Llama-3.1-8B",
            variant=name,
            precision=precision,
            at=START,
            metrics={"accuracy:arc_easy:acc_norm": 0.8},
        )


@pytest.fixture
def token(team: Any) -> str:
    return token_create(team=team, kind="ingest", name="drift script")[1]


def payload(batch: str = "drift-2026-03-01") -> dict[str, Any]:
    return {
        "batch_id": batch,
        "items": [
            {
                "model": "Llama-3.1-8B",
                "variant": "int4-awq",
                "day": "2026-03-01",
                "task": "chat",
                "agreement_rate": 0.973,
                "kl_divergence": 0.012,
                "perplexity_delta": 0.08,
                "samples": 5000,
            },
            {
                "model": "Llama-3.1-8B",
                "variant": "int4-awq",
                "day": "2026-03-02",
                "task": "chat",
                "agreement_rate": 0.969,
                "samples": 4800,
            },
        ],
    }


def post(client: Client, body: Any, token: str | None) -> Any:
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    return client.post(URL, data=orjson.dumps(body), content_type="application/json", **headers)


def test_it_stores_agreement_rows_for_the_tokens_team(
    client: Client, team: Any, token: str, variants: None
) -> None:
    response = post(client, payload(), token)
    assert response.status_code == 200, response.content
    assert response.json() == {"batch_id": "drift-2026-03-01", "accepted": 2, "duplicate": False}
    rows = list(
        ProductionAgreement.objects.order_by("day").values_list(
            "team_id", "task", "agreement_rate", "kl_divergence", "samples"
        )
    )
    assert rows == [(team.pk, "chat", 0.973, 0.012, 5000), (team.pk, "chat", 0.969, None, 4800)]


def test_it_answers_a_retried_batch_from_the_first_request(
    client: Client, token: str, variants: None
) -> None:
    first = post(client, payload(), token)
    retry = post(client, payload(), token)
    assert retry.status_code == 200
    assert retry.json() == {**first.json(), "duplicate": True}
    # The same batch id with other figures is no retry: a 409 naming the key, nothing rewritten.
    changed = payload()
    changed["items"][0]["agreement_rate"] = 0.5
    reused = post(client, changed, token)
    assert reused.status_code == 409
    error = reused.json()["error"]
    assert (error["code"], error["path"]) == ("idempotency_key_reused", "batch_id")
    assert "drift-2026-03-01" in error["message"]
    assert ProductionAgreement.objects.count() == 2
    assert ProductionAgreement.objects.get(day="2026-03-01").agreement_rate == 0.973
    # A new batch for the same day and task replaces the figures (upsert), adding no row.
    resent = payload("drift-2026-03-01-corrected")
    resent["items"][0]["agreement_rate"] = 0.971
    assert post(client, resent, token).json()["duplicate"] is False
    assert ProductionAgreement.objects.count() == 2
    assert ProductionAgreement.objects.get(day="2026-03-01").agreement_rate == 0.971


def test_it_needs_a_write_token(client: Client, team: Any, variants: None) -> None:
    assert post(client, payload(), None).status_code == 401
    assert post(client, payload(), "ab_not-a-real-token").status_code == 401
    read_token = token_create(team=team, kind="read")[1]
    response = post(client, payload(), read_token)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "wrong_token_kind"
    assert not ProductionAgreement.objects.exists()


def _future() -> str:
    return (datetime.now(UTC).date() + timedelta(days=3)).isoformat()


@pytest.mark.parametrize(
    ("mutate", "path", "code"),
    [
        (lambda p: p["items"][1].update(agreement_rate=1.2), "items[1].agreement_rate", "less_than_equal"),
        (lambda p: p["items"][0].update(samples=0), "items[0].samples", "greater_than_equal"),
        (lambda p: p["items"][0].update(samples="5000"), "items[0].samples", "int_type"),
        (lambda p: p["items"][0].update(kl_divergence=-0.1), "items[0].kl_divergence", "greater_than_equal"),
        (lambda p: p["items"][0].update(day="2026-02-30"), "items[0].day", "date_from_datetime_parsing"),
        (lambda p: p["items"][0].update(day=_future()), "items[0].day", "future_day"),
        (lambda p: p["items"][0].pop("task"), "items[0].task", "missing"),
        (lambda p: p["items"][0].update(colour="red"), "items[0].colour", "extra_forbidden"),
        (lambda p: p["items"][1].update(variant="int3"), "items[1].variant", "unknown_variant"),
        (lambda p: p["items"][1].update(model="Nope-1B"), "items[1].model", "unknown_variant"),
        (lambda p: p["items"][1].update(day="2026-03-01"), "items[1]", "duplicate_item"),
        (lambda p: p.update(items=[]), "items", "too_short"),
        (lambda p: p.pop("batch_id"), "batch_id", "missing"),
    ],
)
def test_it_rejects_bad_input_naming_the_field_and_stores_nothing(
    client: Client, token: str, variants: None, mutate: Any, path: str, code: str
) -> None:
    body = deepcopy(payload())
    mutate(body)
    response = post(client, body, token)
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert (error["path"], error["code"]) == (path, code), error
    assert not ProductionAgreement.objects.exists()
    assert not AgreementBatch.objects.exists()


def test_it_rejects_a_body_that_is_not_json(client: Client, token: str, variants: None) -> None:
    response = client.post(
        URL, data=b"{not json", content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert 400 <= response.status_code < 500
    assert "error" in response.json()
