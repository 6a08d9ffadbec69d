"""Who may see and do what: every page and API endpoint, by role and team (NetBox-style matrix).

The cast (tests/conftest.py): ``lead``, ``engineer`` and ``finance`` of ``team``; ``other_lead`` of
``other_team``; ``outsider`` in no team; ``staff``. Every object below belongs to ``team``.

Policy, from issue 9:
- everyone signed in opens the area pages (overview, trends, hardware, runs, quantization, costs,
  alerts, hosts, teams, alert emails), each scoped to their teams; anonymous users go to login;
- a team's objects (runs, alerts, hosts, the team page) are a 404 outside the team: ids of other
  teams' objects reveal nothing;
- engineers and leads upload runs and triage their team's alerts; finance reads but writes no
  runs and triages nothing (403); leads alone change the team page;
- API tokens are scoped to one team and one kind: read tokens read, ingest tokens write, a token
  never sees another team's data (404), a missing token is a 401.

``test_it_covers_every_route`` fails when a page or endpoint is added without a row here.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from accelboard.api.services import token_create
from tests import factories

pytestmark = pytest.mark.django_db

ROLES = ["anonymous", "lead", "engineer", "finance", "other_lead", "outsider", "staff"]
LOGIN = 302  # anonymous users are sent to the login page

# (route name, url kwargs key, method, expected status per role in ROLES order)
ALL_200 = (LOGIN, 200, 200, 200, 200, 200, 200)
TEAM_ONLY = (LOGIN, 200, 200, 200, 404, 404, 200)
PAGES: list[tuple[str, str | None, str, tuple[int, ...]]] = [
    ("dashboard:overview", None, "GET", ALL_200),
    ("dashboard:trends", None, "GET", ALL_200),
    ("dashboard:hardware", None, "GET", ALL_200),
    ("benchmarks:run_list", None, "GET", ALL_200),
    ("benchmarks:compare", None, "GET", ALL_200),
    # Finance writes no runs; a user in no team has no team to upload to.
    ("benchmarks:upload", None, "GET", (LOGIN, 200, 200, 403, 200, 403, 200)),
    ("benchmarks:run_detail", "run", "GET", TEAM_ONLY),
    ("benchmarks:run_raw", "run", "GET", (LOGIN, 404, 404, 404, 404, 404, 404)),  # no raw file kept
    ("benchmarks:compare_baseline", "run", "GET", TEAM_ONLY),
    ("drift:overview", None, "GET", ALL_200),
    # A model's page shows the team's runs of it: a model the user's teams never ran is a 404.
    ("drift:model", "model", "GET", TEAM_ONLY),
    ("costs:report", None, "GET", ALL_200),
    ("costs:drill", None, "GET", ALL_200),
    ("alerts:list", None, "GET", ALL_200),
    ("alerts:detail", "alert", "GET", TEAM_ONLY),
    ("fleet:hosts", None, "GET", ALL_200),
    ("fleet:host_detail", "host", "GET", TEAM_ONLY),
    ("fleet:host_telemetry", "host", "GET", TEAM_ONLY),
    ("core:team_list", None, "GET", ALL_200),
    ("core:team_detail", "team", "GET", TEAM_ONLY),
    ("notifications:subscriptions", None, "GET", ALL_200),
]
# Writes: the status of a well-formed request (a redirect after a successful form post).
WRITES: list[tuple[str, str | None, dict[str, str], tuple[int, ...]]] = [
    ("alerts:triage", "alert-acknowledge", {}, (LOGIN, 302, 302, 403, 404, 404, 302)),
    ("core:team_detail", "team", {"action": "threshold", "metric": "", "min_effect_pct": "3"},
     (LOGIN, 302, 403, 403, 404, 404, 302)),
]  # fmt: skip
# Routes not in the matrix above, and why.
EXEMPT = {
    "healthz": "liveness probe for load balancers, deliberately public",
    "login": "the login page itself",
    "logout": "POST-only, acts on the caller's own session",
    "benchmarks:upload_preview": "POST-only JSON step of the upload page; upload's row covers who may",
    "benchmarks:upload_save": "POST-only JSON step of the upload page; upload's row covers who may",
    "alerts:bulk_triage": "the list's bulk form; the same services and checks as alerts:triage",
    "notifications:subscriptions_my_teams": "acts on the caller's own subscriptions only",
    "notifications:subscription_mode": "acts on the caller's own subscriptions only (404 otherwise)",
    "notifications:subscription_delete": "acts on the caller's own subscriptions only (404 otherwise)",
    "notifications:unsubscribe": "signed-token link from an email, works without login by design",
}


@pytest.fixture
def world(team: Any, other_team: Any) -> dict[str, Any]:
    h100 = factories.accelerator_type_from(factories.H100)
    host, gpus = factories.host_create(team=team, gpus=1)
    factories.telemetry_days_load(gpus=gpus, days=1, interval_s=900)
    run = factories.run_create(team=team, accelerator_type=h100, host=host)
    alert = factories.alert_create(team=team)
    return {"team": team, "run": run, "alert": alert, "host": host, "model": run.workload.variant.model}


def _url(name: str, key: str | None, world: dict[str, Any]) -> str:
    if key is None:
        return reverse(name)
    if key == "alert-acknowledge":
        return reverse(name, args=[world["alert"].pk, "acknowledge"])
    if key == "team":
        return reverse(name, args=[world["team"].slug])
    return reverse(name, args=[world[key].pk])


def _client(role: str, cast: dict[str, Any]) -> Client:
    client = Client()
    if role != "anonymous":
        client.force_login(cast[role])
    return client


@pytest.mark.parametrize(("name", "key", "method", "expected"), PAGES, ids=[p[0] for p in PAGES])
def test_it_answers_each_role_as_the_policy_says(
    cast: dict[str, Any],
    world: dict[str, Any],
    name: str,
    key: str | None,
    method: str,
    expected: tuple[int, ...],
) -> None:
    url = _url(name, key, world)
    got = {role: _client(role, cast).get(url).status_code for role in ROLES}
    assert got == dict(zip(ROLES, expected, strict=True)), url


@pytest.mark.parametrize(("name", "key", "data", "expected"), WRITES, ids=[w[0] for w in WRITES])
def test_it_lets_only_the_right_roles_write(
    cast: dict[str, Any],
    world: dict[str, Any],
    name: str,
    key: str | None,
    data: dict[str, str],
    expected: tuple[int, ...],
) -> None:
    got = {}
    for role in ROLES:
        # Each role acts on a fresh open alert, so an earlier role's success does not hide a refusal.
        world["alert"] = factories.alert_create(team=world["team"])
        got[role] = _client(role, cast).post(_url(name, key, world), data).status_code
    assert got == dict(zip(ROLES, expected, strict=True))


def test_it_covers_every_route() -> None:
    covered = {p[0] for p in PAGES} | {w[0] for w in WRITES} | set(EXEMPT)

    def names(patterns: list[Any], namespace: str = "") -> set[str]:
        found: set[str] = set()
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                if pattern.namespace in ("admin", "api-v1"):  # admin: Django's own; API: its own matrix
                    continue
                inner = f"{namespace}:{pattern.namespace}" if namespace else (pattern.namespace or "")
                found |= names(pattern.url_patterns, inner)
            elif isinstance(pattern, URLPattern) and pattern.name:
                found.add(f"{namespace}:{pattern.name}" if namespace else pattern.name)
        return found

    assert names(get_resolver().url_patterns) - covered == set()


# --- the API: token kind x team ----------------------------------------------------------------


@pytest.fixture
def tokens(team: Any, other_team: Any) -> dict[str, str]:
    return {
        "read": token_create(team=team, kind="read", name="r")[1],
        "ingest": token_create(team=team, kind="ingest", name="i")[1],
        "read-write": token_create(team=team, kind="read-write", name="rw")[1],
        "other-read": token_create(team=other_team, kind="read", name="o")[1],
    }


TOKENS = ["none", "read", "ingest", "read-write", "other-read"]
API_READS: list[tuple[str, str | None, tuple[int, ...]]] = [
    ("api-v1:run_list", None, (401, 200, 403, 200, 200)),
    ("api-v1:run_detail", "run", (401, 200, 403, 200, 404)),
    ("api-v1:series_list", None, (401, 200, 403, 200, 200)),
    ("api-v1:series_points", "series", (401, 200, 403, 200, 404)),
    ("api-v1:alert_list", None, (401, 200, 403, 200, 200)),
]


@pytest.mark.parametrize(("name", "key", "expected"), API_READS, ids=[a[0] for a in API_READS])
def test_it_scopes_api_reads_to_the_tokens_team_and_kind(
    client: Any,
    world: dict[str, Any],
    tokens: dict[str, str],
    name: str,
    key: str | None,
    expected: tuple[int, ...],
) -> None:
    run = world["run"]
    args = {"run": [run.pk], "series": [run.metrics.first().series_id]}.get(key or "", [])
    url = reverse(name, args=args)
    got = {}
    for kind in TOKENS:
        headers = {} if kind == "none" else {"HTTP_AUTHORIZATION": f"Bearer {tokens[kind]}"}
        response = client.get(url, **headers)
        got[kind] = response.status_code
        if kind == "other-read" and response.status_code == 200:
            # A list answered to another team's token holds none of this team's rows.
            assert response.json()["count"] == 0, url
    assert got == dict(zip(TOKENS, expected, strict=True)), url


def test_it_lets_only_write_tokens_post_and_never_into_another_team(
    client: Any, team: Any, tokens: dict[str, str]
) -> None:
    from accelboard.serving.models import InferenceMetric

    url = reverse("api-v1:inference_metrics_post")
    got = {}
    for kind in TOKENS:
        headers = {} if kind == "none" else {"HTTP_AUTHORIZATION": f"Bearer {tokens[kind]}"}
        body = {
            "batch_id": f"perm-{kind}",
            "host": "perm-node",
            "intervals": [
                {
                    "model": "Llama-3.1-8B",
                    "variant": "bf16",
                    "interval_start": (datetime.now(UTC) - timedelta(minutes=5)).isoformat(),
                    "interval_s": 60,
                    "requests": 10,
                }
            ],
        }
        got[kind] = client.post(url, body, content_type="application/json", **headers).status_code
    assert got == {"none": 401, "read": 403, "ingest": 200, "read-write": 200, "other-read": 403}
    assert set(InferenceMetric.objects.values_list("team_id", flat=True)) == {team.pk}
