"""Who may see and do what: every page and API endpoint, by role and team (NetBox-style matrix).

The cast (tests/conftest.py): ``lead``, ``engineer`` and ``finance`` of ``team``; ``other_lead`` of
``other_team``; ``outsider`` in no team; ``staff``. Every object below belongs to ``team``.

Policy (``accelboard.core.access`` states the rules):
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
from pathlib import Path
from typing import Any

import pytest
from django.core.mail import EmailMessage
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from accelboard.api.services import token_create
from accelboard.benchmarks.import_services import run_import
from accelboard.canary.services import canary_check_create
from accelboard.fleet.ingest_services import telemetry_batch_ingest
from accelboard.fleet.models import Workload
from accelboard.importers import parse_bytes
from accelboard.notifications.backends import OutboxBackend
from accelboard.notifications.models import AlertRoute, OutboxMessage
from accelboard.notifications.route_secrets import secret_seal
from accelboard.planning.models import PlanScenario
from tests import factories

FIXTURES = Path(__file__).parent / "importers" / "fixtures"

pytestmark = pytest.mark.django_db

ROLES = ["anonymous", "lead", "engineer", "finance", "other_lead", "outsider", "staff"]
LOGIN = 302  # anonymous users are sent to the login page

# (route name, url kwargs key, method, expected status per role in ROLES order)
ALL_200 = (LOGIN, 200, 200, 200, 200, 200, 200)
TEAM_ONLY = (LOGIN, 200, 200, 200, 404, 404, 200)
STAFF_ONLY = (LOGIN, 403, 403, 403, 403, 403, 200)
PAGES: list[tuple[str, str | None, str, tuple[int, ...]]] = [
    ("dashboard:overview", None, "GET", ALL_200),
    ("dashboard:trends", None, "GET", ALL_200),
    ("dashboard:hardware", None, "GET", ALL_200),
    ("benchmarks:run_list", None, "GET", ALL_200),
    ("benchmarks:compare", None, "GET", ALL_200),
    # Finance writes no runs; a user in no team has no team to upload to.
    ("benchmarks:upload", None, "GET", (LOGIN, 200, 200, 403, 200, 403, 200)),
    ("benchmarks:run_detail", "run", "GET", TEAM_ONLY),
    # A run uploaded as a file keeps it: the team downloads it, everyone else gets a 404.
    ("benchmarks:run_raw", "uploaded_run", "GET", TEAM_ONLY),
    ("benchmarks:compare_baseline", "run", "GET", TEAM_ONLY),
    ("drift:overview", None, "GET", ALL_200),
    # A model's page shows the team's runs of it: a model the user's teams never ran is a 404.
    ("drift:model", "model", "GET", TEAM_ONLY),
    ("canary:list", None, "GET", ALL_200),
    ("canary:detail", "canary_check", "GET", TEAM_ONLY),
    # The check form: team leads (of any team, for their teams) and staff; the edit form only the
    # check's team's leads (its other members see the check: 403; other teams do not: 404).
    ("canary:new", None, "GET", (LOGIN, 200, 403, 403, 200, 403, 200)),
    ("canary:edit", "canary_check", "GET", (LOGIN, 200, 403, 403, 404, 404, 200)),
    ("costs:report", None, "GET", ALL_200),
    ("costs:drill", None, "GET", ALL_200),
    ("allocation:page", None, "GET", ALL_200),
    ("alerts:list", None, "GET", ALL_200),
    ("alerts:detail", "alert", "GET", TEAM_ONLY),
    ("fleet:hosts", None, "GET", ALL_200),
    ("fleet:host_detail", "host", "GET", TEAM_ONLY),
    ("fleet:host_telemetry", "host", "GET", TEAM_ONLY),
    ("workloads:list", None, "GET", ALL_200),
    # A workload on the team's host that no rule gives to another team: the team's alone.
    ("workloads:detail", "workload", "GET", TEAM_ONLY),
    ("core:team_list", None, "GET", ALL_200),
    ("core:team_detail", "team", "GET", TEAM_ONLY),
    ("notifications:subscriptions", None, "GET", ALL_200),
    # Everyone signed in may list routes (their own personal ones; leads their teams').
    ("notifications:routes", None, "GET", ALL_200),
    ("profiles:run_profile", "run", "GET", TEAM_ONLY),
    # Without ?a=&b= there is nothing to compare: a 400 naming the parameter, for everyone signed in.
    ("profiles:compare", None, "GET", (LOGIN, 400, 400, 400, 400, 400, 400)),
    ("planning:plan", None, "GET", ALL_200),
    # A saved plan belongs to its team (finance sees every team's, as with costs).
    ("planning:scenario", "scenario", "GET", TEAM_ONLY),
    # Every user's emails: staff only.
    ("notifications:outbox", None, "GET", STAFF_ONLY),
    ("notifications:outbox_message", "outbox_message", "GET", STAFF_ONLY),
    ("notifications:outbox_message_html", "outbox_message", "GET", STAFF_ONLY),
]
# Writes: the status of a well-formed request (a redirect after a successful form post).
WRITES: list[tuple[str, str | None, dict[str, str], tuple[int, ...]]] = [
    ("alerts:triage", "alert-acknowledge", {}, (LOGIN, 302, 302, 403, 404, 404, 302)),
    ("core:team_detail", "team", {"action": "threshold", "metric": "", "min_effect_pct": "3"},
     (LOGIN, 302, 403, 403, 404, 404, 302)),
    # No file: 400 for those who may attach; finance may not (403); other teams do not see the run.
    ("profiles:attach", "run", {}, (LOGIN, 400, 400, 403, 404, 404, 400)),
    ("notifications:outbox_clear", None, {}, (LOGIN, 403, 403, 403, 403, 403, 302)),
    ("canary:edit", "canary_check", {"model": "Llama-3.1-8B", "baseline": "track=stable", "canary": "track=canary",
     "window_minutes": "30", "alpha": "0.005"}, (LOGIN, 302, 403, 403, 404, 404, 302)),
    # A team route: its leads and staff; anyone else is told nothing of it (404).
    ("notifications:route_test", "route", {}, (LOGIN, 302, 404, 404, 404, 404, 302)),
]  # fmt: skip
# Routes not in the matrix above, and why.
EXEMPT = {
    "healthz": "liveness probe for load balancers, deliberately public",
    "favicon": "the site icon (a redirect to static/), asked for by browsers on every page, deliberately public",
    "login": "the login page itself",
    "oidc_authentication_init": "single sign-on's start (a redirect to the provider; 404 while it is off), before any login",
    "oidc_authentication_callback": "single sign-on's way back from the provider, before any login (tests/core/test_sso_sign_in.py)",
    "logout": "POST-only, acts on the caller's own session",
    "benchmarks:upload_preview": "POST-only JSON step of the upload page; upload's row covers who may",
    "benchmarks:upload_save": "POST-only JSON step of the upload page; upload's row covers who may",
    "alerts:bulk_triage": "the list's bulk form; the same services and checks as alerts:triage",
    "notifications:subscriptions_my_teams": "acts on the caller's own subscriptions only",
    "notifications:subscription_mode": "acts on the caller's own subscriptions only (404 otherwise)",
    "notifications:subscription_delete": "acts on the caller's own subscriptions only (404 otherwise)",
    "notifications:unsubscribe": "signed-token link from an email, works without login by design",
    "planning:scenario_save": "POST-only; who may save (leads, finance; engineers 403, other teams 404) is "
    "tested in tests/planning/test_views.py on a world with traffic to plan",
    "planning:scenario_delete": "POST-only; the same rule as saving, tested in tests/planning/test_views.py",
    "notifications:triage": "signed-token link from an email (acts as the user it names), no login by design",
    "notifications:test_email": "POST-only, sends to the caller's own address only",
    "notifications:route_delete": "POST-only; the same rule as route_test (leads and staff, 404 otherwise), "
    "tested in tests/notifications/test_route_views.py",
    "notifications:route_chart": "signed-token link to an alert's chart PNG, fetched by Slack/Teams without login",
}


@pytest.fixture
def world(team: Any, other_team: Any, settings: Any, tmp_path: Path) -> dict[str, Any]:
    settings.MEDIA_ROOT = tmp_path / "media"
    h100 = factories.accelerator_type_from(factories.H100)
    host, gpus = factories.host_create(team=team, gpus=1)
    factories.telemetry_days_load(gpus=gpus, days=1, interval_s=900)
    run = factories.run_create(team=team, accelerator_type=h100, host=host)
    # A pod that held the GPU for an hour, reported as the agent reports it.
    held_from = timezone.now() - timedelta(hours=2)
    telemetry_batch_ingest(
        team_id=team.pk,
        payload={
            "batch_id": "matrix:1",
            "host": {"hostname": host.hostname},
            "accelerators": [{"uuid": gpus[0].uuid, "index": 0, "name": gpus[0].name}],
            "samples": [{"time": held_from.timestamp(), "gpu": gpus[0].uuid, "power_w": 300.0}],
            "attribution": [
                {
                    "gpu": gpus[0].uuid,
                    "start": held_from.timestamp(),
                    "end": held_from.timestamp() + 3600,
                    "workload": {"kind": "pod", "uid": "ns/p", "namespace": "ns", "name": "p"},
                    "share": 1.0,
                    "basis": "exclusive",
                }
            ],
        },
    )
    alert = factories.alert_create(team=team)
    # A run stored from a result file, which keeps the file (the raw-file route serves it).
    data = (FIXTURES / "vllm_2025.json").read_bytes()
    [parsed] = parse_bytes(data, filename="vllm_2025.json")
    uploaded, _ = run_import(
        team=team,
        parsed=parsed,
        raw_name="vllm_2025.json",
        raw_bytes=data,
        uploaded_via="web",
        overrides={"accelerator": h100.name, "count": "1"},
    )
    assert uploaded.raw_file
    scenario = PlanScenario.objects.create(
        team=team,
        model=run.workload.variant.model,
        name="budget",
        created_at=timezone.now(),
        window_start=timezone.now() - timedelta(days=28),
        window_end=timezone.now(),
    )
    # An email kept by the outbox backend (the outbox pages show it to staff only).
    # The backend itself: get_connection(path) is refused once Django 6.1's MAILERS is set.
    OutboxBackend().send_messages(
        [EmailMessage("Regression", "body", "accelboard@example.com", ["lead@example.com"])]
    )
    # A team route to a closed loopback port: its test fails fast and is recorded (a 302 back).
    route = AlertRoute.objects.create(
        team=team,
        name="hook",
        channel="webhook",
        secret=secret_seal({"url": "http://127.0.0.1:9/hook", "signing_secret": "whsec_x"}),
    )
    return {
        "team": team,
        "route": route,
        "run": run,
        "uploaded_run": uploaded,
        "outbox_message": OutboxMessage.objects.get(),
        "alert": alert,
        "host": host,
        "model": run.workload.variant.model,
        "scenario": scenario,
        "workload": Workload.objects.get(),
        "canary_check": canary_check_create(
            team=team,
            model=run.workload.variant.model,
            name="perm",
            baseline={"track": "stable"},
            canary={"track": "canary"},
        ),
    }


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
    # The token's team's GPU cost (its read of money, like its runs'): rows only of that team.
    ("api-v1:allocation", None, (401, 200, 403, 200, 200)),
    # A canary check's verdict: the token's team's checks only (another team's name is a 404).
    ("api-v1:canary", "canary", (401, 200, 403, 200, 404)),
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
    args = {
        "run": [run.pk],
        "series": [run.metrics.first().series_id],
        "canary": [world["canary_check"].name],
    }.get(key or "", [])
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
    factories.host_create(team=team, hostname="perm-node")  # a serving batch needs the team's host
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


def test_it_lets_only_write_tokens_remote_write_and_never_into_another_team(
    client: Any, team: Any, tokens: dict[str, str]
) -> None:
    from accelboard.fleet.models import Host
    from tests.fleet.prom_wire import snappy, write_request

    url = reverse("api-v1:prometheus_write")
    got = {}
    for kind in TOKENS:
        headers = {"HTTP_CONTENT_ENCODING": "snappy"}
        if kind != "none":
            headers["HTTP_AUTHORIZATION"] = f"Bearer {tokens[kind]}"
        labels = {
            "__name__": "DCGM_FI_DEV_POWER_USAGE",
            "Hostname": f"perm-{kind}",
            "UUID": f"GPU-perm-{kind}",
        }
        body = snappy(write_request([(labels, [(int(timezone.now().timestamp() * 1000), 100.0)])]))
        got[kind] = client.post(url, body, content_type="application/x-protobuf", **headers).status_code
    assert got == {"none": 401, "read": 403, "ingest": 200, "read-write": 200, "other-read": 403}
    assert set(Host.objects.values_list("hostname", "team_id")) >= {
        ("perm-ingest", team.pk),
        ("perm-read-write", team.pk),
    }
    assert not Host.objects.filter(hostname__in=["perm-none", "perm-read", "perm-other-read"]).exists()
