"""The hardware comparison page: who sees what, the table, the charts' series, the recommendation
answered from hand-computed costs, bad parameters, empty states and a query-count guard.

``hardware_fleet_create`` makes the hand-worked case (also used by the browser test):

=====================  ========  =======  ========  ========  ======
configuration          tput      p99 ms   capacity  energy    total
=====================  ========  =======  ========  ========  ======
fp8  H100 batch 8      1000      20       1.00      0.02      1.02
fp8  H100 batch 16     1900      21       0.50      0.02      0.52
fp8  H100 batch 32     3500      24       0.28      0.02      0.30
fp8  H100 batch 64     5000      36       0.20      0.01      0.21
fp8  H100 batch 128    5600      60       0.18      0.01      0.19
bf16 H100 batch 64     3000      30       0.33      0.02      0.35
int4 H100 batch 64     4000      22       0.25      0.01      0.26
fp8  L40S batch 64     1500      45       0.12      0.01      0.13
=====================  ========  =======  ========  ========  ======

(USD per 1M tokens.) The fp8 H100 sweep's knee is batch 32 (32 -> 64: throughput +43%, p99
+50%). Pareto frontier: L40S, fp8 bs64, int4 bs64, fp8 bs16, fp8 bs8. p99 <= 25 ms: int4 bs64 at
0.26 (runners-up fp8 bs32, bs16, bs8); with floor fp8: fp8 bs32 at 0.30; with floor bf16: none,
the fastest is bf16 at 30 ms. The other team's L4 run (p99 5 ms, 0.01) would win everything if it
leaked.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from accelboard.benchmarks.models import BenchmarkRun
from accelboard.core.models import Team
from accelboard.costs.models import RunCost
from tests.factories import H100, accelerator_type_create, accelerator_type_from, run_create

URL = reverse("dashboard:hardware")
MODEL = "Llama-3.1-8B"

# (variant, precision, accelerator, batch, throughput, p99, capacity, energy)
CASE = [
    ("fp8", "fp8", "H100", 8, 1000.0, 20.0, "1.00", "0.02"),
    ("fp8", "fp8", "H100", 16, 1900.0, 21.0, "0.50", "0.02"),
    ("fp8", "fp8", "H100", 32, 3500.0, 24.0, "0.28", "0.02"),
    ("fp8", "fp8", "H100", 64, 5000.0, 36.0, "0.20", "0.01"),
    ("fp8", "fp8", "H100", 128, 5600.0, 60.0, "0.18", "0.01"),
    ("bf16", "bf16", "H100", 64, 3000.0, 30.0, "0.33", "0.02"),
    ("int4-awq", "int4", "H100", 64, 4000.0, 22.0, "0.25", "0.01"),
    ("fp8", "fp8", "L40S", 64, 1500.0, 45.0, "0.12", "0.01"),
]


def _main(response: Any) -> str:
    """The page's ``<main>`` element without CSRF tokens: short names such as "L4" must not be
    found in a random token (one page in sixty had "L4" in the logout form's token)."""
    html = response.content.decode()
    main = html[html.index("<main") : html.index("</main>")]
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", main)


def run_cost_set(*, run: BenchmarkRun, capacity: str, energy: str, currency: str = "USD") -> RunCost:
    """A stored per-run cost as the costs app writes it (figures given, not recomputed)."""
    cost, _ = RunCost.objects.update_or_create(
        run=run,
        defaults={
            "unit": "token",
            "capacity_cost_per_1m": Decimal(capacity),
            "energy_cost_per_1m": Decimal(energy),
            "total_cost_per_1m": Decimal(capacity) + Decimal(energy),
            "currency": currency,
            "computed_at": timezone.now(),
        },
    )
    return cost


def hardware_fleet_create(*, team: Team, other_team: Team | None = None, repeats: int = 1) -> dict[str, Any]:
    """The hand-worked case above for ``team`` (``repeats`` nightly runs per configuration, all
    with the same figures) and, for ``other_team``, one L4 run that beats everything."""
    h100 = accelerator_type_from(H100)
    l40s = accelerator_type_create(name="L40S", slug="l40s", board_power_w=350.0, memory_bytes=48 * 2**30)
    types = {"H100": h100, "L40S": l40s}
    start = datetime.now(UTC) - timedelta(days=repeats + 1)
    runs: dict[tuple[str, str, int], list[BenchmarkRun]] = {}
    for night in range(repeats):
        for variant, precision, accel, batch, throughput, p99, capacity, energy in CASE:
            metrics = {
                "throughput_tokens_per_s": throughput,
                "latency_p50_ms": p99 / 1.6,
                "latency_p99_ms": p99,
                "power_avg_w": 500.0,
            }
            if (variant, accel, batch) == ("fp8", "H100", 64):
                metrics["memory_peak_bytes"] = 70 * 2**30
            run = run_create(
                team=team,
                accelerator_type=types[accel],
                model=MODEL,
                variant=variant,
                precision=precision,
                batch_size=batch,
                metrics=metrics,
                started_at=start + timedelta(days=night),
            )
            run_cost_set(run=run, capacity=capacity, energy=energy)
            runs.setdefault((variant, accel, batch), []).append(run)
    other = None
    if other_team is not None:
        l4 = accelerator_type_create(name="L4", slug="l4", board_power_w=72.0, memory_bytes=24 * 2**30)
        other = run_create(
            team=other_team,
            accelerator_type=l4,
            model=MODEL,
            variant="fp8",
            precision="fp8",
            batch_size=64,
            metrics={"throughput_tokens_per_s": 9000.0, "latency_p99_ms": 5.0},
        )
        run_cost_set(run=other, capacity="0.005", energy="0.005")
    return {"runs": runs, "other": other, "h100": h100, "l40s": l40s}


@pytest.fixture
def fleet(team: Team, other_team: Team) -> dict[str, Any]:
    return hardware_fleet_create(team=team, other_team=other_team)


def _labels(response: Any) -> list[str]:
    return [p.label for p in response.context["points"]]


def test_it_shows_every_configuration_of_the_teams_runs_side_by_side(
    login_client: Any, lead: Any, fleet: dict[str, Any]
) -> None:
    response = login_client(lead).get(URL)
    assert response.status_code == 200
    assert response.context["group"].model_name == MODEL
    points = {p.label: p for p in response.context["points"]}
    assert len(points) == 8
    assert "fp8 on 1× L4 (batch 64)" not in points  # the other team's run
    row = points["fp8 on 1× H100 SXM 80GB (batch 64)"]
    assert row.throughput == 5000.0
    assert row.throughput_per_w == pytest.approx(10.0)
    assert row.total_cost_per_1m == pytest.approx(0.21)
    assert row.memory_headroom_bytes == H100["memory_bytes"] - 70 * 2**30
    body = response.content.decode()
    assert "tokens/s / W" in body and "1M tokens" in body
    assert f'href="/runs/{fleet["runs"][("fp8", "H100", 64)][0].pk}/"' in body


def test_it_draws_the_pareto_frontier_and_the_sweep_knee(
    login_client: Any, lead: Any, fleet: dict[str, Any]
) -> None:
    response = login_client(lead).get(URL)
    assert response.context["frontier_labels"] == [
        "fp8 on 1× H100 SXM 80GB (batch 8)",
        "fp8 on 1× H100 SXM 80GB (batch 16)",
        "fp8 on 1× H100 SXM 80GB (batch 64)",
        "int4-awq on 1× H100 SXM 80GB (batch 64)",
        "fp8 on 1× L40S (batch 64)",
    ]
    pareto = response.context["pareto_figure"]
    assert [t["name"] for t in pareto["data"]] == ["H100 SXM 80GB", "L40S", "Pareto frontier"]
    frontier = pareto["data"][-1]
    assert frontier["x"] == [20.0, 21.0, 22.0, 36.0, 45.0]
    assert frontier["y"] == [1.02, 0.52, 0.26, 0.21, 0.13]
    h100 = pareto["data"][0]
    faded = [
        x for x, colour in zip(h100["x"], h100["marker"]["color"], strict=True) if colour.endswith(",0.3)")
    ]
    assert h100["marker"]["color"][0] == "#2563eb"  # a frontier point first: the legend's colour
    assert sorted(faded) == [24.0, 30.0, 60.0]  # fp8 bs32, bf16, fp8 bs128
    sweep = response.context["sweep_figure"]
    assert [t["name"] for t in sweep["data"]] == ["fp8 on 1× H100 SXM 80GB", "Knee"]
    assert sweep["data"][0]["text"] == ["bs 8", "bs 16", "bs 32", "bs 64", "bs 128"]
    assert (sweep["data"][1]["x"], sweep["data"][1]["y"]) == ([24.0], [3500.0])
    assert sweep["layout"]["yaxis"]["title"]["text"] == "Throughput (tokens/s)"
    assert pareto["layout"]["yaxis"]["title"]["text"] == "Total cost per 1M tokens (USD)"


@pytest.mark.parametrize(
    ("query", "best", "cost", "runners_up"),
    [
        ("p99_ms=25", "int4-awq on 1× H100 SXM 80GB (batch 64)", 0.26, 3),
        ("p99_ms=25&precision_floor=fp8", "fp8 on 1× H100 SXM 80GB (batch 32)", 0.30, 2),
        ("p99_ms=50", "fp8 on 1× L40S (batch 64)", 0.13, 3),
    ],
)
def test_it_recommends_the_cheapest_configuration_for_a_target(
    login_client: Any, lead: Any, fleet: dict[str, Any], query: str, best: str, cost: float, runners_up: int
) -> None:
    response = login_client(lead).get(f"{URL}?{query}")
    assert response.status_code == 200
    answer = response.context["recommendation"]
    assert answer.best.label == best
    assert answer.best.total_cost_per_1m == pytest.approx(cost)
    assert len(answer.runners_up) == runners_up
    assert answer.best.label in response.content.decode()


def test_it_says_when_nothing_meets_the_target(login_client: Any, lead: Any, fleet: dict[str, Any]) -> None:
    response = login_client(lead).get(f"{URL}?p99_ms=25&precision_floor=bf16")
    answer = response.context["recommendation"]
    assert answer.best is None
    expected = (
        "Nothing meets 25 ms at bf16 or better; the fastest is bf16 on 1× H100 SXM 80GB (batch 64) at 30 ms."
    )
    assert answer.message == expected
    assert expected in response.content.decode()


def test_it_opens_on_a_workload_and_hides_other_teams_workloads(
    login_client: Any, lead: Any, other_lead: Any, outsider: Any, fleet: dict[str, Any]
) -> None:
    workload_id = fleet["runs"][("fp8", "H100", 64)][0].workload_id
    assert login_client(lead).get(f"{URL}?workload={workload_id}").context["group"].model_name == MODEL
    assert login_client(other_lead).get(f"{URL}?workload={workload_id}").status_code == 404
    assert login_client(outsider).get(f"{URL}?workload={workload_id}").status_code == 404


def test_it_shows_another_team_only_its_own_runs(
    login_client: Any, other_lead: Any, fleet: dict[str, Any]
) -> None:
    response = login_client(other_lead).get(f"{URL}?p99_ms=25")
    assert _labels(response) == ["fp8 on 1× L4 (batch 64)"]
    assert "H100" not in _main(response)


def test_it_shows_an_outsider_nothing(login_client: Any, outsider: Any, fleet: dict[str, Any]) -> None:
    model_id = fleet["runs"][("fp8", "H100", 64)][0].workload.variant.model_id
    for query in ("", f"?model={model_id}&scenario=offline&p99_ms=25"):
        response = login_client(outsider).get(URL + query)
        assert response.status_code == 200
        body = _main(response)
        assert "You are not in a team yet" in body
        assert "H100" not in body and "L4" not in body


def test_it_shows_staff_every_team(login_client: Any, staff: Any, fleet: dict[str, Any]) -> None:
    response = login_client(staff).get(f"{URL}?p99_ms=25")
    assert len(response.context["points"]) == 9
    assert response.context["recommendation"].best.label == "fp8 on 1× L4 (batch 64)"


def test_it_says_so_when_a_linked_group_has_no_runs(
    login_client: Any, other_lead: Any, fleet: dict[str, Any]
) -> None:
    model_id = fleet["other"].workload.variant.model_id
    response = login_client(other_lead).get(f"{URL}?model={model_id}&scenario=server")
    assert response.status_code == 200
    assert response.context["asked_missing"]
    assert "No runs of that model in that scenario" in response.content.decode()


def test_it_explains_an_empty_page(login_client: Any, lead: Any) -> None:
    response = login_client(lead).get(URL)
    assert response.status_code == 200
    body = response.content.decode()
    assert "No benchmark runs to compare yet" in body
    assert 'data-figure="' not in body


def test_it_explains_missing_costs_and_sweeps(login_client: Any, lead: Any, team: Team) -> None:
    run_create(team=team, accelerator_type=accelerator_type_from(H100), model=MODEL)
    body = login_client(lead).get(f"{URL}?p99_ms=100").content.decode()
    assert "No costs to chart" in body and "No batch-size sweep" in body
    # The run names no host: that is why it has no price, and the page says so and how to fix it,
    # never "no price for their accelerator" (the price was never looked up).
    assert "1 without a cost (why: below the table)" in body
    assert 'data-cost-gap="no-host"' in body
    assert "names no host of its team, so no price can be looked up" in body
    assert "upload the result with its host" in body
    assert "no price for their accelerator" not in body


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("p99_ms=abc", "p99_ms"),
        ("p99_ms=-5", "p99_ms"),
        ("p99_ms=20&precision_floor=fp3", "precision_floor"),
        ("precision_floor=fp8", "p99_ms"),
        ("model=1", "scenario"),
        ("model=x&scenario=offline", "model"),
        ("workload=0", "workload"),
    ],
)
def test_it_rejects_bad_parameters_with_a_400_naming_the_field(
    login_client: Any, lead: Any, fleet: dict[str, Any], query: str, field: str
) -> None:
    response = login_client(lead).get(f"{URL}?{query}")
    assert response.status_code == 400
    assert f"{field}: " in response.content.decode()


def test_it_sends_anonymous_visitors_to_log_in(client: Any, fleet: dict[str, Any]) -> None:
    response = client.get(URL)
    assert response.status_code == 302
    assert "/login" in response["Location"]


def test_it_reads_a_flat_number_of_queries_however_many_runs(
    login_client: Any, lead: Any, team: Team, django_assert_max_num_queries: Any
) -> None:
    hardware_fleet_create(team=team, repeats=2)
    client = login_client(lead)
    # Session + user + memberships (team scope) + groups + runs + metrics; slack for the session save.
    with django_assert_max_num_queries(8):
        small = client.get(f"{URL}?p99_ms=25")
    hardware_fleet_create(team=team, repeats=4)
    with django_assert_max_num_queries(8):
        large = client.get(f"{URL}?p99_ms=25")
    assert large.context["recommendation"].best.label == small.context["recommendation"].best.label
    assert all(len(p.run_ids) == 5 for p in large.context["points"])


@pytest.mark.parametrize(
    ("who", "configurations"),
    [("lead", 8), ("engineer", 8), ("finance", 8), ("other_lead", 1), ("outsider", 0), ("staff", 9)],
)
def test_it_scopes_the_page_to_each_role_s_teams(
    login_client: Any, cast: dict[str, Any], fleet: dict[str, Any], who: str, configurations: int
) -> None:
    response = login_client(cast[who]).get(URL)
    assert response.status_code == 200
    assert len(response.context.get("points") or []) == configurations


def test_it_highlights_the_workload_a_link_came_from(
    login_client: Any, lead: Any, fleet: dict[str, Any]
) -> None:
    workload_id = fleet["runs"][("fp8", "H100", 32)][0].workload_id
    response = login_client(lead).get(f"{URL}?workload={workload_id}")
    assert response.context["focus_labels"] == ["fp8 on 1× H100 SXM 80GB (batch 32)"]
    assert response.content.decode().count('class="focus"') == 1


def test_it_takes_energy_per_inference_from_the_stored_cost_when_the_run_lacks_it(
    login_client: Any, lead: Any, team: Team
) -> None:
    per_inference = run_create(
        team=team,
        accelerator_type=accelerator_type_from(H100),
        model="ResNet-50",
        variant="fp16",
        precision="fp16",
    )
    RunCost.objects.create(
        run=per_inference, unit="inference", energy_per_unit_j=2.5, computed_at=timezone.now()
    )
    per_token = run_create(
        team=team, accelerator_type=accelerator_type_create(name="L40S"), model="ResNet-50", variant="fp16"
    )
    RunCost.objects.create(run=per_token, unit="token", energy_per_unit_j=0.1, computed_at=timezone.now())
    points = {p.accelerator: p for p in login_client(lead).get(URL).context["points"]}
    assert points["H100 SXM 80GB"].energy_per_inference_j == 2.5
    assert points["L40S"].energy_per_inference_j is None  # per token is not per inference


def test_it_says_which_price_each_configuration_is_costed_with(
    login_client: Any, lead: Any, team: Team
) -> None:
    # An H100 costs 0.80 per GPU-hour on-prem and 6.76 in the cloud: the page did not say which
    # price row a configuration's cost per 1M came from.
    from accelboard.costs.models import AcceleratorPrice
    from accelboard.costs.run_cost_services import run_cost_compute
    from tests import factories

    h100 = accelerator_type_from(H100)
    today = datetime.now(UTC).date()
    for provider, model, per_hour, count in (
        ("on-prem", "on-prem", "0.8000", 1),
        ("aws", "on-demand", "54.0800", 8),
    ):
        AcceleratorPrice.objects.create(
            accelerator_type=h100, accelerator_count=count, provider=provider, pricing_model=model,
            price_per_hour=Decimal(per_hour), source=f"{provider} (test)", fetched_on=today,
            valid_from=today - timedelta(days=30),
        )  # fmt: skip
    hosts = {}
    for provider in ("on-prem", "aws"):
        host, _ = factories.host_create(team=team, gpus=1)
        host.provider = provider
        host.save(update_fields=["provider"])
        hosts[provider] = host
    for provider, batch in (("on-prem", 32), ("aws", 64)):
        run = run_create(
            team=team, accelerator_type=h100, model=MODEL, variant="fp8", precision="fp8", batch_size=batch,
            metrics={"throughput_tokens_per_s": 5000.0, "latency_p99_ms": 30.0}, host=hosts[provider],
        )  # fmt: skip
        run_cost_compute(run=run)
    body = _main(login_client(lead).get(URL))
    # The price and the price row are two lines of one block (tags between them, not a comma).
    bases = [
        re.sub(r"<[^>]+>", "", b) for b in re.findall(r"data-price-basis[^>]*>(.*?)</span></span>", body)
    ]
    assert bases == ["0.80 USD/GPU-hour, on-prem (amortised)", "6.76 USD/GPU-hour, aws on-demand"]


def test_it_writes_each_column_in_one_number_format(
    login_client: Any, lead: Any, fleet: dict[str, Any]
) -> None:
    # One column once read 0.0312 / 0.03584 / 0.001902: each now has one number of decimals.
    body = _main(login_client(lead).get(URL))
    table = body.split('data-table="configurations"')[1].split("</table>")[0]
    cells: dict[int, set[int]] = {}
    for row in re.findall(r"<tr data-config.*?</tr>", table, flags=re.S):
        for index, cell in enumerate(re.findall(r'<td class="num"[^>]*>\s*([-\d,.]+)', row)):
            cells.setdefault(index, set()).add(len(cell.split(".")[1]) if "." in cell else 0)
    assert cells and all(len(decimals) == 1 for decimals in cells.values()), cells
    # Total per 1M from 0.13 to 1.02: three decimals keep the cheapest's three significant digits.
    totals = re.findall(r'data-col="total">([\d.]+)', table)
    assert {"1.020", "0.520", "0.130"} <= set(totals)


def test_it_links_all_runs_of_a_configuration_with_its_batch_size(
    login_client: Any, lead: Any, fleet: dict[str, Any]
) -> None:
    # "all" of fp8 H100 batch 8 listed the runs of every batch size.
    client = login_client(lead)
    body = _main(client.get(URL))
    row = body.split('data-config="fp8 on 1× H100 SXM 80GB (batch 8)"')[1].split("</tr>")[0]
    link = re.search(r'href="([^"]*)" data-all-runs', row).group(1).replace("&amp;", "&")
    assert "batch=8" in link and "gpus=1" in link
    runs = client.get(link).context["page"].object_list
    assert {(r.workload.batch_size, r.workload.variant.name) for r in runs} == {(8, "fp8")}
    # A batch size is a whole number: anything else is a 400 naming the field.
    assert client.get(reverse("benchmarks:run_list"), {"batch": "1.5"}).status_code == 400
