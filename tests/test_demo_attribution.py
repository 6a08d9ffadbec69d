"""The demo's shared fleet (docs/attribution.md): who ran on each GPU in the plan, the loaded
history and the live fleet's batches, the planned rules' unattributed share, and the cost per 1M
tokens by model agreeing with the serving costs (the served models' pods hold the GPUs their
serving metrics name)."""

from __future__ import annotations

import itertools
import json
import random
from collections import defaultdict
from datetime import UTC, date, datetime, time
from decimal import Decimal
from io import StringIO
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.db.models import Sum
from django.test import Client

from accelboard.attribution.models import AllocationDaily
from accelboard.attribution.rules import Rule, Workload, rules_check, workload_match
from accelboard.costs.models import CostDaily
from accelboard.demo import attribution_generator, generator, live, loader, plan, serving_plan
from accelboard.fleet.ingest_services import registrations
from accelboard.fleet.models import Accelerator, GpuAttribution
from accelboard.fleet.models import Workload as WorkloadRow
from accelboard.serving.models import InferenceMetric
from tests.test_demo_fleet import NOW, SMALL, SMALL_FLAGS


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def small_demo(transactional_db: None, tmp_path: Path) -> None:
    """tests/test_demo_fleet.py's small demo, loaded by the command (the raw tables are unmanaged:
    the flush between tests does not empty them)."""
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE fleet_telemetrysample, fleet_gpuattribution")
    call_command("demo_fleet", *SMALL_FLAGS, f"--manifest={tmp_path / 'm.json'}", stdout=StringIO())


def _world(**changes: Any) -> tuple[Any, ...]:
    config = generator.DemoConfig(now=NOW, **changes)
    hosts = generator.fleet_plan(config)
    events = generator.telemetry_events(config, hosts)
    telemetry = [generator.host_telemetry(config, host, events) for host in hosts]
    instances = attribution_generator.fleet_instances(config.seed, hosts)
    history = attribution_generator.attribution_history(
        hosts=hosts,
        telemetry=telemetry,
        instances=instances,
        interval_s=config.telemetry_interval_s,
        canary_window=serving_plan.canary_window(
            config.telemetry_start, config.telemetry_end, config.serving_interval_s
        ),
    )
    return config, hosts, telemetry, instances, history


def _rule_set() -> Any:
    return rules_check([Rule(id=n, **rule) for n, rule in enumerate(plan.ATTRIBUTION_RULES, start=1)])


def _match(workload: attribution_generator.WorkloadPlan) -> Any:
    return workload_match(
        rule_set=_rule_set(),
        workload=Workload(
            namespace=workload.namespace or None,
            labels=dict(workload.labels),
            account=workload.account or None,
            user=workload.user or None,
        ),
    )


# --- The plan, pure ------------------------------------------------------------------------------


def test_it_finds_busy_runs_ending_at_an_idle_sample_or_a_gap() -> None:
    epochs = np.array([0, 60, 120, 180, 300, 360])
    util = np.array([5.0, 5.0, 0.0, 7.0, 8.0, 9.0])
    # 180 is busy but 240 is missing: that run ends where the next sample would have been.
    assert attribution_generator.busy_runs(epochs, util, 60) == [(0, 120), (180, 240), (300, 420)]
    assert attribution_generator.busy_runs(epochs[:0], util[:0], 60) == []


def test_it_plans_a_shared_cluster_mig_a_time_sliced_gpu_and_slurm_within_each_device() -> None:
    config, hosts, telemetry, instances, history = _world(days_telemetry=2, telemetry_interval_s=300)
    by_host = {host.hostname: host for host in hosts}

    # MIG: 3g + 2g + 1g + 1g of 7 on each cut GPU of the node, each instance its parent's.
    mig_host = by_host[plan.MIG["host"]]
    assert set(instances) == {mig_host.gpus[i].uuid for i in plan.MIG["gpus"]}
    for parent, cut in instances.items():
        assert [i.slices for i in cut] == [3, 2, 1, 1] and sum(i.slices for i in cut) <= 7
        assert {i.parent_uuid for i in cut} == {parent}

    kinds: dict[str, set[str]] = defaultdict(set)
    for host, data in zip(hosts, telemetry, strict=True):
        gpus = {gpu.uuid: row for row, gpu in enumerate(host.gpus)}
        parent_of = {i.uuid: p for p in gpus if p in instances for i in instances[p]}
        per_device: dict[str, list[attribution_generator.Interval]] = defaultdict(list)
        for interval in history[host.hostname]:
            # On a GPU of its host (or a MIG instance of one), within one UTC day of the samples.
            assert interval.device in gpus or interval.device in parent_of
            assert config.telemetry_start <= interval.start < interval.end <= config.telemetry_end
            assert interval.start // 86400 == (interval.end - 1) // 86400
            assert 0 < interval.share <= 1
            # Held means busy: every sample of the interval shows the GPU at work.
            row = gpus[parent_of.get(interval.device, interval.device)]
            inside = (data.epochs >= interval.start) & (data.epochs < interval.end)
            assert inside.any() and (data.columns["gpu_util"][row, inside] > 0).all()
            per_device[interval.device].append(interval)
            kinds[host.hostname].add(interval.workload.kind)
        # At every moment a device's shares add up to at most 1, and no workload holds it twice.
        for device, intervals in per_device.items():
            edges = sorted({t for i in intervals for t in (i.start, i.end)})
            for moment in edges[:-1]:
                held = [i for i in intervals if i.start <= moment < i.end]
                assert sum(i.share for i in held) <= 1 + 1e-6, (device, moment)
                assert len({i.workload for i in held}) == len(held)

    # Several teams' namespaces on one node of the shared cluster; the time-sliced GPU's two pods
    # measured, their shares below 1 together; Slurm jobs of several users on its nodes.
    node = history["reno-h100-01"]
    assert {i.workload.namespace for i in node} >= {
        "llm-serving",
        "speech-batch",
        "vision-train",
        "research-notebooks",
    }
    sliced_uuid = by_host[plan.TIME_SLICED["host"]].gpus[plan.TIME_SLICED["gpu"]].uuid
    sliced = [i for i in node if i.device == sliced_uuid]
    assert {i.basis for i in sliced} == {"measured"} and len({i.workload.uid for i in sliced}) == 2
    assert all(i.sm_util is not None and 0 < i.sm_util <= 100 * i.share for i in sliced)
    jobs = [i.workload for h in plan.SLURM_CLUSTER["nodes"] for i in history.get(h, [])]
    assert jobs and {w.kind for w in jobs} == {"slurm-job"} and len({w.user for w in jobs}) >= 3
    assert all(w.account and w.partition == "gpu" for w in jobs)
    assert kinds["reno-h100-01"] == {"pod"}


def test_the_canaries_take_their_gpus_from_a_midnight_held_by_their_own_pods() -> None:
    # Longer telemetry than the window: the canaries start at the first midnight UTC in its last
    # 72 h (no GPU changes deployment within a day); shorter: the whole telemetry.
    config, hosts, _, _, history = _world(hosts=2, days_telemetry=5, telemetry_interval_s=300)
    low, high = serving_plan.canary_window(
        config.telemetry_start, config.telemetry_end, config.serving_interval_s
    )
    assert low % 86_400 == 0 and 48 * 3600 < high - low <= 72 * 3600 and high == config.telemetry_end
    assert serving_plan.canary_window(1000, 1000 + 3 * 86_400, 300) == (900, 1000 + 3 * 86_400)

    host = next(h for h in hosts if h.hostname == serving_plan.CANARY_HOST)
    stable = plan.POD_TEMPLATES["llama8b-fp8"]["model"]
    for canary in serving_plan.CANARIES:
        gpu = host.gpus[canary["gpu"]].uuid
        held = sorted(
            (i.start, i.end, dict(i.workload.labels)["model"])
            for i in history[host.hostname]
            if i.device == gpu
        )
        own = plan.POD_TEMPLATES[canary["pod"]]["model"]
        assert held and {m for a, b, m in held if b <= low} == {stable}
        assert {m for a, b, m in held if a >= low} == {own}
        assert all(b <= low or a >= low for a, b, _ in held)  # cut at the window's start
    # The stable deployment's other GPUs stay its own throughout.
    for index in set(range(4)) - {c["gpu"] for c in serving_plan.CANARIES}:
        gpu = host.gpus[index].uuid
        assert {dict(i.workload.labels)["model"] for i in history[host.hostname] if i.device == gpu} == {
            stable
        }


def test_it_splits_a_time_sliced_hour_into_shares_below_one() -> None:
    for hour in range(0, 48 * 3600, 3600):
        first, second = attribution_generator.sliced_shares("reno-h200-01", hour)
        assert 0.35 <= first < 0.65 and second > 0 and first + second <= 1


def test_it_leaves_under_5_percent_of_the_months_gpu_time_unattributed_under_the_planned_rules() -> None:
    config, hosts, telemetry, instances, history = _world()
    slices = {i.uuid: i.slices / plan.MIG["total_slices"] for cut in instances.values() for i in cut}
    total = unattributed = 0.0
    namespaces = set()
    for intervals in history.values():
        for interval in intervals:
            gpu_seconds = (interval.end - interval.start) * interval.share * slices.get(interval.device, 1.0)
            total += gpu_seconds
            if _match(interval.workload).team is None:
                unattributed += gpu_seconds
                namespaces.add(interval.workload.namespace)
    # Shown, not hidden: the unlabelled pods in namespaces nobody maps, and nothing else.
    assert 0 < unattributed / total < 0.05
    assert namespaces == {"sandbox", "default"}
    # Every mapped pod of a model label gets its model; a Slurm job its team by its account.
    pod = attribution_generator.holds(
        node=attribution_generator.Node("reno-h100-01", "llm-serving", "serving"),
        gpu_index=0,
        gpu_uuid="GPU-x",
        run_start=0,
    )[0]
    match = _match(pod.workload)
    assert (match.team, match.model, match.variant) == ("llm-serving", "Llama-3.1-8B", "fp8")


# --- The load and the live fleet, on the real database ---------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_it_loads_each_interval_once_and_the_live_fleets_batches_carry_it_through_ingest(
    small_demo: None, live_server: Any
) -> None:
    config, hosts, _, instances, history = _world(**SMALL)
    planned = [i for intervals in history.values() for i in intervals]

    # The MIG instances are registered under their GPU, which says its total slices.
    physical = Accelerator.objects.filter(parent_uuid="")
    assert physical.count() == sum(len(h.gpus) for h in hosts)
    for parent, cut in instances.items():
        assert physical.get(uuid=parent).compute_slices == 7
        rows = Accelerator.objects.filter(parent_uuid=parent).order_by("-compute_slices", "uuid")
        assert sorted(rows.values_list("compute_slices", flat=True)) == [1, 1, 2, 3]
        assert not rows.filter(accelerator_type__isnull=False).exists()
        assert set(rows.values_list("uuid", flat=True)) == {i.uuid for i in cut}

    # Each planned interval stored once, within the telemetry days.
    assert GpuAttribution.objects.count() == len(planned)
    with connection.cursor() as cursor:
        cursor.execute(
            'SELECT count(DISTINCT (accelerator_id, workload_id, start)), min(start), max("end") '
            "FROM fleet_gpuattribution"
        )
        distinct, first, last = cursor.fetchone()
    assert distinct == len(planned)
    assert first >= datetime.fromtimestamp(config.telemetry_start, UTC)
    assert last <= datetime.fromtimestamp(config.telemetry_end, UTC)
    assert WorkloadRow.objects.count() == len(
        {(h.team, i.workload.uid) for h in hosts for i in history[h.hostname]}
    )
    job = WorkloadRow.objects.filter(kind="slurm-job").first()
    assert job is not None and job.account and job.partition == "gpu"

    # Cost by workload under the demo's rules: each host-day's cost split to the cent on both
    # bases, and under 5 % of the spend unattributed.
    billed: dict[tuple[Any, int], Decimal] = {}
    for row in CostDaily.objects.exclude(total_cost=None):
        key = (row.day, row.host_id)
        billed[key] = billed.get(key, Decimal(0)) + row.total_cost.quantize(Decimal("0.01"))
    split = {
        (r["day"], r["host_id"]): (r["a"], r["u"])
        for r in AllocationDaily.objects.values("day", "host_id").annotate(
            a=Sum("cost_allocation"), u=Sum("cost_usage")
        )
    }
    assert billed and set(split) == set(billed)
    assert all(split[key] == (amount, amount) for key, amount in billed.items())
    total = sum(billed.values())
    unattributed = AllocationDaily.objects.filter(kind="unattributed").aggregate(a=Sum("cost_allocation"))[
        "a"
    ]
    assert unattributed is not None and 0 < unattributed < total * Decimal("0.05")

    # The live fleet: two rounds; the second round's batches carry who held each GPU since the first.
    hosts_live, tokens = live.fleet_read()
    registrations.clear()
    client = Client()
    rng = random.Random(1)
    now = datetime.now(UTC).timestamp()
    before = GpuAttribution.objects.count()
    sent = 0
    for round_time in (now - 20, now - 10):
        for host in hosts_live:
            samples = [live.sample(round_time, now - 30, 10, host, gpu, rng) for gpu in host.gpus]
            intervals = []
            if host.previous:
                intervals = live.attribution(host, host.previous[0], round_time, host.previous[1])
            host.previous = (round_time, {s["gpu"]: float(s["gpu_util"]) for s in samples})
            body = live.batch(host, samples, run_id="test", interval_s=10, intervals=intervals)
            response = client.post(
                "/api/v1/telemetry",
                data=json.dumps(body),
                content_type="application/json",
                HTTP_AUTHORIZATION=f"Bearer {tokens[host.team_id]}",
            )
            assert response.status_code in (200, 201), response.content
            sent += len(intervals)
    # The same batch again (a retry from the spool): accepted, nothing stored twice.
    response = client.post(
        "/api/v1/telemetry",
        data=json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {tokens[host.team_id]}",
    )
    assert response.status_code == 200, response.content
    mig_host = next(h for h in hosts_live if h.hostname == plan.MIG["host"])
    # The live fleet reads the MIG instances back in the history's order: the same pod on each.
    assert mig_host.node().instances == {parent: [i.uuid for i in cut] for parent, cut in instances.items()}
    assert sent > 0 and GpuAttribution.objects.count() == before + sent
    stored = GpuAttribution.objects.filter(start__gte=datetime.fromtimestamp(now - 21, UTC))
    assert stored.filter(basis="measured").count() == 2
    assert stored.filter(accelerator__parent_uuid__gt="").exists()
    assert stored.filter(workload__kind="slurm-job").exists()

    # The live fleet's own loop, over HTTP: its second round's batches carry attribution, accepted.
    before = GpuAttribution.objects.count()
    assert live.run(server=live_server.url, interval_s=1, ticks=2) == 0
    assert GpuAttribution.objects.count() > before
    assert loader.demo_fleet_reset() and not GpuAttribution.objects.exists()


def _covered(config: generator.DemoConfig, day: date) -> Decimal:
    """The part of ``day`` (UTC) inside the demo's telemetry window: 1 but for its first and last."""
    start = int(datetime.combine(day, time.min, tzinfo=UTC).timestamp())
    inside = min(start + 86_400, config.telemetry_end) - max(start, config.telemetry_start)
    return Decimal(max(inside, 0)) / 86_400


@pytest.mark.django_db(transaction=True)
def test_the_cost_per_1m_tokens_by_model_agrees_with_the_serving_costs(
    small_demo: None, client: Client
) -> None:
    """The pods serving a model hold the GPUs its serving metrics name (plan.KUBERNETES_CLUSTER,
    serving_plan.SERVING), so both pages count one model's tokens against the same GPUs' cost.

    What the two bases may still differ by: the allocation spreads a GPU-day's cost (that of the
    minutes it reported) over the day's 86,400 s, so on the window's partial first and last days
    the hours outside it are idle (the serving costs count the reported hours only): the
    allocation's month is the serving one's with each day weighted by the part of it inside the
    window (0.92 in the small demo: 2 h, 24 h, 22 h). Beyond that, 1 %: a host-day's cost is split
    across its GPUs by their reporting minutes (energy included, where the serving costs take
    each GPU's own energy), each GPU-day taken at the cent."""
    config = generator.DemoConfig(now=NOW, **SMALL)
    month = f"{NOW:%Y-%m}"
    client.force_login(get_user_model().objects.get(username=plan.ADMIN_USERNAME))
    page = client.get("/costs/allocation/", {"month": month, "group_by": "model"})
    assert page.status_code == 200
    by_model = {row["label"]: row for row in page.context["table"].rows if row["_kind"] == "workload"}

    served: dict[str, list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0), Decimal(0)])
    for model in {d["model"] for d in serving_plan.SERVING}:
        drill = client.get("/costs/drill/", {"month": month, "model": model})
        assert drill.status_code == 200
        for row in drill.context["tables"][0].rows:
            sums = served[f"{row['variant__model__name']} {row['variant__name']}"]
            sums[0] += row["total_cost"]
            sums[1] += row["generated_tokens"]
            sums[2] += row["total_cost"] * _covered(config, row["day"])
    # The small demo's served models (the first two serving hosts) and the canaries (their own
    # pods on their own GPUs), each by one source.
    assert set(served) == {
        "Llama-3.1-8B fp8",
        "Llama-2-70B fp8",
        "Llama-3.1-8B fp8-v2",
        "Llama-3.1-8B fp8-v3",
    }
    sources: dict[str, set[str]] = defaultdict(set)
    for model, variant, source in AllocationDaily.objects.filter(model__startswith="Llama").values_list(
        "model", "variant", "model_source"
    ):
        sources[f"{model} {variant}"].add(source)
    # The 70B's pods are unlabelled: their model is the one their metrics name; the 8B's by label.
    assert sources == {
        "Llama-2-70B fp8": {"serving"},
        "Llama-3.1-8B fp8": {"label"},
        "Llama-3.1-8B fp8-v2": {"label"},
        "Llama-3.1-8B fp8-v3": {"label"},
    }
    for key, (cost, tokens, weighted) in served.items():
        row = by_model[key]
        assert row["tokens"] == tokens > 0
        serving_per_1m = cost * 1_000_000 / tokens
        assert Decimal("0.01") < serving_per_1m < Decimal("0.5")  # USD: cents per 1M tokens
        expected = serving_per_1m * weighted / cost
        assert abs(row["cost_per_mtok"] / expected - 1) < Decimal("0.01"), (
            key,
            row["cost_per_mtok"],
            expected,
        )
        assert Decimal("0.9") < weighted / cost < Decimal("0.95")
    # What no rule maps stays under 5 % of the month's spend, and is shown.
    card = page.context["cards"][0]
    assert 0 < card["unattributed_pct"] < 5


@pytest.mark.django_db(transaction=True)
def test_no_gpu_is_named_by_two_deployments_at_once_and_each_is_held_by_its_own_pod(small_demo: None) -> None:
    """The canaries (accelboard.demo.canary) each take one of the stable deployment's GPUs for the
    window: in the loaded demo's serving data no GPU is named by two deployments in one interval
    (so a GPU's energy and GPU-hours count once), and the pod holding a GPU whenever a deployment
    names it is that deployment's (so the serving costs and the cost by model count the same GPUs)."""
    config = generator.DemoConfig(now=NOW, **SMALL)
    holders: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    rows = list(
        InferenceMetric.objects.values_list(
            "host__hostname", "variant__name", "labels", "interval_start", "interval_s", "accelerator_uuids"
        )
    )
    for hostname, variant, labels, start, seconds, uuids in rows:
        begin = int(start.timestamp())
        for uuid in uuids:
            holders[uuid].append((begin, begin + seconds, f"{hostname} {variant} {labels}"))
    for uuid, spans in holders.items():
        spans.sort()
        for (_, first_end, first), (second_start, _, second) in itertools.pairwise(spans):
            assert first_end <= second_start, (uuid, first, second)

    # The window (the small demo's whole serving history): the canaries on a GPU each, the stable rows on the other two with the rest of
    # the traffic (per GPU, as much as the harmless canary serves).
    low, high = serving_plan.canary_window(
        config.telemetry_start, config.telemetry_end, config.serving_interval_s
    )
    window = {"interval_start__gte": datetime.fromtimestamp(low, UTC)}
    stable = InferenceMetric.objects.filter(labels={"track": "stable"})
    intervals = (high - low) // config.serving_interval_s
    assert stable.count() == intervals == stable.filter(**window).count() > 0
    canary_gpus = {
        variant: set(uuids)
        for variant, uuids in InferenceMetric.objects.filter(variant__name__in=["fp8-v2", "fp8-v3"])
        .values_list("variant__name", "accelerator_uuids").distinct()
    }  # fmt: skip
    assert len(canary_gpus) == 2 and all(len(gpus) == 1 for gpus in canary_gpus.values())
    taken = set().union(*canary_gpus.values())
    assert all(len(u) == 2 and not taken & set(u) for u in stable.values_list("accelerator_uuids", flat=True))
    v3 = InferenceMetric.objects.filter(variant__name="fp8-v3").aggregate(r=Sum("requests"))["r"]
    assert stable.aggregate(r=Sum("requests"))["r"] / 2 == pytest.approx(v3, rel=0.02)

    # Each GPU a deployment names is held, while it names it, by that deployment's pod: the
    # canaries' by their own, labelled with their variant.
    holds = defaultdict(list)
    for uuid, start, end, labels in GpuAttribution.objects.filter(accelerator__uuid__in=holders).values_list(
        "accelerator__uuid", "start", "end", "workload__labels"
    ):
        holds[uuid].append((int(start.timestamp()), int(end.timestamp()), labels.get("model", "")))
    models = {"fp8": "llama-3.1-8b-fp8", "fp8-v2": "llama-3.1-8b-fp8-v2", "fp8-v3": "llama-3.1-8b-fp8-v3"}
    for hostname, variant, _, start, seconds, uuids in rows:
        if hostname != serving_plan.CANARY_HOST:
            continue
        begin = int(start.timestamp())
        for uuid in uuids:
            held = {model for a, b, model in holds[uuid] if a < begin + seconds and b > begin}
            assert held <= {models[variant]}, (uuid, variant, start, held)
    assert {model for uuid in taken for _, _, model in holds[uuid]} == {
        "llama-3.1-8b-fp8-v2",
        "llama-3.1-8b-fp8-v3",
    }
