"""POST /api/v1/telemetry with ``attribution`` (docs/attribution.md): workloads and GPU attribution
intervals stored with the batch, read back exactly; partitions, idempotency, duplicates, bad input
(a 4xx naming the field, nothing of the batch stored) and retention, on the real database."""

from __future__ import annotations

import copy
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from accelboard.fleet import partition_services
from accelboard.fleet.ingest_services import registrations
from accelboard.fleet.models import Accelerator, Workload

from .conftest import GPU_A, GPU_B, post_json, row_counts, telemetry_payload

URL = "/api/v1/telemetry"
# 2026-11-29 23:58:00 UTC: the batch's last interval crosses midnight.
T = datetime(2026, 11, 29, 23, 58, tzinfo=UTC).timestamp()
MIG_1 = "MIG-11111111-0000-4000-8000-000000000001"
MIG_2 = "MIG-11111111-0000-4000-8000-000000000002"

POD = {
    "kind": "pod",
    "uid": "5d1c0b7e-1111-4000-8000-00000000000a",
    "namespace": "llm-serving",
    "name": "vllm-llama-7f9c",
    "container": "vllm",
    "labels": {"app": "vllm", "team": "llm"},
}
JOB = {
    "kind": "slurm-job",
    "uid": "481516",
    "name": "train-7b",
    "user": "alice",
    "account": "nlp",
    "partition": "gpu",
}
PROCESS = {"kind": "process", "uid": "4242@1764454100", "name": "python"}


def _interval(
    gpu: str, start: float, end: float, workload: dict[str, Any], share: float = 1.0, **extra: Any
) -> dict:
    return {
        "gpu": gpu,
        "start": start,
        "end": end,
        "workload": workload,
        "share": share,
        "basis": "exclusive" if share == 1.0 else "measured",
        **extra,
    }


def _payload(attribution: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
    payload = telemetry_payload(n=4, start=T, **kwargs)
    payload["attribution"] = attribution
    return payload


def _batch() -> list[dict[str, Any]]:
    """GPU A: the pod alone for a minute. GPU B: the job and a process share it by measure for a
    minute, then the job alone for four minutes across midnight."""
    return [
        _interval(GPU_A, T, T + 60, POD, memory_bytes=21_474_836_480, sm_util=97.5),
        _interval(GPU_B, T, T + 60, JOB, share=0.75, memory_bytes=40_000_000_000, sm_util=61.0),
        _interval(GPU_B, T, T + 60, PROCESS, share=0.25, sm_util=19.0),
        _interval(GPU_B, T + 60, T + 300, JOB),
    ]


def _stored() -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT a.uuid, g.start, g."end", w.kind, w.uid, g.share, g.basis, g.memory_bytes, g.sm_util
            FROM fleet_gpuattribution g
            JOIN fleet_accelerator a ON a.id = g.accelerator_id
            JOIN fleet_workload w ON w.id = g.workload_id
            ORDER BY a.uuid, g.start, w.kind
            """
        )
        return cursor.fetchall()


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(T + seconds, UTC)


MIDNIGHT = datetime(2026, 11, 30, tzinfo=UTC)
EXPECTED = [
    (GPU_A, _at(0), _at(60), "pod", POD["uid"], 1.0, "exclusive", 21_474_836_480, 97.5),
    (GPU_B, _at(0), _at(60), "process", PROCESS["uid"], 0.25, "measured", None, 19.0),
    (GPU_B, _at(0), _at(60), "slurm-job", "481516", 0.75, "measured", 40_000_000_000, 61.0),
    # [23:59, 00:03) is stored as its two days' parts.
    (GPU_B, _at(60), MIDNIGHT, "slurm-job", "481516", 1.0, "exclusive", None, None),
    (GPU_B, MIDNIGHT, _at(300), "slurm-job", "481516", 1.0, "exclusive", None, None),
]


def _attribution_partitions() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = 'fleet_gpuattribution'"
        )
        return {row[0] for row in cursor.fetchall()}


def _counts() -> dict[str, int]:
    counts = row_counts()  # the workloads and intervals among them
    assert {"fleet_workload", "fleet_gpuattribution"} <= counts.keys()
    return counts


def test_it_stores_workloads_and_intervals_exactly(client: Client, team: Any, ingest_token: str) -> None:
    payload = _payload(_batch())
    response = post_json(client, URL, payload, ingest_token)
    assert response.status_code == 200, response.content
    assert response.json() == {
        "batch_id": payload["batch_id"],
        "accepted": 4,
        "duplicate_samples": 0,
        "duplicate": False,
        "attribution": 4,
        "attribution_duplicates": 0,
    }
    assert _stored() == EXPECTED
    assert {"fleet_gpuattribution_p20261129", "fleet_gpuattribution_p20261130"} <= _attribution_partitions()
    pod = Workload.objects.get(team=team, kind="pod", uid=POD["uid"])
    assert (pod.namespace, pod.name, pod.container, pod.labels) == (
        "llm-serving",
        "vllm-llama-7f9c",
        "vllm",
        {"app": "vllm", "team": "llm"},
    )
    assert (pod.first_seen_at, pod.last_seen_at) == (_at(0), _at(60))
    job = Workload.objects.get(team=team, kind="slurm-job", uid="481516")
    assert (job.name, job.user, job.account, job.partition) == ("train-7b", "alice", "nlp", "gpu")
    assert (job.first_seen_at, job.last_seen_at) == (_at(0), _at(300))
    assert Workload.objects.count() == 3


def test_it_stores_compute_slices_and_intervals_of_mig_instances(
    client: Client, team: Any, ingest_token: str
) -> None:
    payload = _payload(
        [
            _interval(MIG_1, T, T + 60, POD, share=1.0),
            _interval(MIG_2, T, T + 60, JOB, share=1.0),
        ]
    )
    payload["accelerators"][0].update(mig_mode=True, compute_slices=7)
    payload["accelerators"] += [
        {"uuid": MIG_1, "parent_uuid": GPU_A, "mig_mode": True, "compute_slices": 3},
        {"uuid": MIG_2, "parent_uuid": GPU_A, "mig_mode": True, "compute_slices": 1},
    ]
    response = post_json(client, URL, payload, ingest_token)
    assert response.status_code == 200, response.content
    slices = dict(Accelerator.objects.values_list("uuid", "compute_slices"))
    assert slices == {GPU_A: 7, GPU_B: None, MIG_1: 3, MIG_2: 1}
    assert [(row[0], row[4]) for row in _stored()] == [(MIG_1, POD["uid"]), (MIG_2, "481516")]


def test_a_retried_batch_stores_nothing_twice(client: Client, team: Any, ingest_token: str) -> None:
    payload = _payload(_batch())
    first = post_json(client, URL, payload, ingest_token).json()
    again = post_json(client, URL, payload, ingest_token)
    assert again.status_code == 200
    assert again.json() == {**first, "duplicate": True}
    assert _stored() == EXPECTED


def test_an_identical_resend_under_a_new_batch_id_is_counted_as_duplicates(
    client: Client, team: Any, ingest_token: str
) -> None:
    assert post_json(client, URL, _payload(_batch()), ingest_token).status_code == 200
    # The same intervals, one new one beside them, and no samples.
    resend = _payload([*_batch(), _interval(GPU_A, T + 60, T + 120, POD)])
    resend["samples"] = []
    response = post_json(client, URL, resend, ingest_token)
    assert response.status_code == 200, response.content
    assert response.json() == {
        "batch_id": resend["batch_id"],
        "accepted": 0,
        "duplicate_samples": 0,
        "duplicate": False,
        "attribution": 1,
        "attribution_duplicates": 4,
    }
    assert _stored() == sorted(
        [*EXPECTED, (GPU_A, _at(60), _at(120), "pod", POD["uid"], 1.0, "exclusive", None, None)]
    )
    # Its retry answers what it answered (the duplicates count was stored after the claim).
    retry = post_json(client, URL, resend, ingest_token)
    assert retry.json() == {**response.json(), "duplicate": True}
    assert Workload.objects.get(kind="pod").last_seen_at == _at(120)


@pytest.mark.parametrize(
    ("stored_share", "new", "rule"),
    [
        # The same workload over part of its stored minute.
        (1.0, _interval(GPU_A, T + 30, T + 90, POD), "one workload's intervals"),
        # Another workload whose share does not fit beside the stored one's.
        (0.6, _interval(GPU_A, T + 30, T + 90, JOB, share=0.5), "add up to more than 1"),
    ],
)
def test_an_interval_overlapping_a_stored_one_is_a_409_naming_it(
    client: Client, team: Any, ingest_token: str, stored_share: float, new: dict[str, Any], rule: str
) -> None:
    stored = _interval(GPU_A, T, T + 60, POD, share=stored_share)
    assert post_json(client, URL, _payload([stored]), ingest_token).status_code == 200
    before = _counts()
    payload = _payload([_interval(GPU_B, T, T + 60, PROCESS), new])
    response = post_json(client, URL, payload, ingest_token)
    assert response.status_code == 409, response.content
    error = response.json()["error"]
    assert (error["code"], error["path"]) == ("attribution_conflict", "attribution[1]")
    assert POD["uid"] in error["message"] and "2026-11-29T23:58:00+00:00" in error["message"]
    assert rule in error["message"]
    assert _counts() == before


def test_a_share_that_fits_beside_a_stored_one_is_stored(
    client: Client, team: Any, ingest_token: str
) -> None:
    assert (
        post_json(
            client, URL, _payload([_interval(GPU_A, T, T + 60, POD, share=0.6)]), ingest_token
        ).status_code
        == 200
    )
    response = post_json(
        client, URL, _payload([_interval(GPU_A, T + 30, T + 90, JOB, share=0.4)]), ingest_token
    )
    assert response.status_code == 200, response.content
    assert [(row[4], row[5]) for row in _stored()] == [
        (POD["uid"], pytest.approx(0.6)),
        ("481516", pytest.approx(0.4)),
    ]


def _bad(mutate: Any) -> dict[str, Any]:
    attribution = copy.deepcopy(_batch())
    mutate(attribution)
    return {"attribution": attribution}


def _set(index: int, **fields: Any) -> Any:
    return lambda a: a[index].update(fields)


def _set_workload(index: int, **fields: Any) -> Any:
    return lambda a: a[index].update(workload={**a[index]["workload"], **fields})


FUTURE = datetime.now(UTC).timestamp() + 3600

BAD = [
    ("end before start", _set(1, end=T - 1), "attribution[1].end", "invalid_interval"),
    ("empty interval", _set(1, end=T), "attribution[1].end", "invalid_interval"),
    ("end in the future", _set(3, end=FUTURE), "attribution[3].end", "time_out_of_range"),
    ("start before 2000", _set(0, start=900_000_000.0), "attribution[0].start", "time_out_of_range"),
    ("naive time", _set(0, start="2026-11-29T23:58:00"), "attribution[0].start", "invalid_time"),
    ("longer than a day", _set(3, end=T + 90_000), "attribution[3].end", "too_long"),
    ("share zero", _set(2, share=0), "attribution[2].share", "out_of_range"),
    ("share above one", _set(0, share=1.5), "attribution[0].share", "out_of_range"),
    ("share a string", _set(0, share="1"), "attribution[0].share", "type"),
    ("unknown basis", _set(0, basis="guess"), "attribution[0].basis", "invalid"),
    ("missing workload", lambda a: a[2].pop("workload"), "attribution[2].workload", "missing"),
    ("unknown kind", _set_workload(0, kind="vm"), "attribution[0].workload.kind", "invalid"),
    ("missing uid", lambda a: a[0]["workload"].pop("uid"), "attribution[0].workload.uid", "missing"),
    ("unknown field", _set(0, colour="red"), "attribution[0].colour", "unknown_field"),
    ("unknown workload field", _set_workload(0, node="n1"), "attribution[0].workload.node", "unknown_field"),
    (
        "newline in a name",
        _set_workload(0, name="vllm\nrm -rf"),
        "attribution[0].workload.name",
        "control_character",
    ),
    (
        "escape in a namespace",
        _set_workload(0, namespace="ns\x1b[31m"),
        "attribution[0].workload.namespace",
        "control_character",
    ),
    (
        "C1 control in a uid",
        _set_workload(0, uid="pod\x85"),
        "attribution[0].workload.uid",
        "control_character",
    ),
    (
        "control in a label value",
        _set_workload(3, labels={"app": "a\x07b"}),
        "attribution[3].workload.labels",
        "control_character",
    ),
    (
        "control in a label key",
        _set_workload(3, labels={"a\tb": "x"}),
        "attribution[3].workload.labels",
        "control_character",
    ),
    (
        "label key too long",
        _set_workload(0, labels={"k" * 64: "x"}),
        "attribution[0].workload.labels",
        "too_long",
    ),
    (
        "label value too long",
        _set_workload(0, labels={"k": "v" * 257}),
        "attribution[0].workload.labels",
        "too_long",
    ),
    (
        "too many labels",
        _set_workload(0, labels={f"k{i}": "v" for i in range(65)}),
        "attribution[0].workload.labels",
        "too_many",
    ),
    ("label not a string", _set_workload(0, labels={"gpu": 1}), "attribution[0].workload.labels", "type"),
    ("name too long", _set_workload(0, name="n" * 254), "attribution[0].workload.name", "too_long"),
    ("negative memory", _set(0, memory_bytes=-1), "attribution[0].memory_bytes", "type"),
    ("utilisation above 100", _set(0, sm_util=100.5), "attribution[0].sm_util", "out_of_range"),
    ("not a list", lambda a: a.clear() or a.append("x"), "attribution[0]", "type"),
    # One workload twice on one device at once: the second names the first.
    (
        "same workload overlapping",
        lambda a: a.append(_interval(GPU_B, T + 299, T + 360, JOB)),
        "attribution[4]",
        "overlap",
    ),
    ("shares above one", _set(2, share=0.3), "attribution[2]", "overlap"),
    ("unknown GPU", _set(0, gpu="GPU-not-on-this-host"), "attribution[0].gpu", "unknown_accelerator"),
]


@pytest.mark.parametrize(
    ("mutate", "path", "code"), [case[1:] for case in BAD], ids=[case[0] for case in BAD]
)
def test_bad_attribution_is_a_422_naming_the_field_and_stores_nothing(
    client: Client, team: Any, ingest_token: str, mutate: Any, path: str, code: str
) -> None:
    before = _counts()
    payload = _payload(_bad(mutate)["attribution"])
    response = post_json(client, URL, payload, ingest_token)
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert (error["path"], error["code"]) == (path, code), error
    assert _counts() == before


def test_overlaps_name_both_intervals(client: Client, team: Any, ingest_token: str) -> None:
    attribution = [*_batch(), _interval(GPU_B, T + 299, T + 360, JOB)]
    error = post_json(client, URL, _payload(attribution), ingest_token).json()["error"]
    assert error["path"] == "attribution[4]" and "attribution[3]" in error["message"]
    attribution = _batch()
    attribution[2]["share"] = 0.3  # 0.75 + 0.3 on GPU B in the first minute
    error = post_json(client, URL, _payload(attribution), ingest_token).json()["error"]
    assert error["path"] == "attribution[2]" and "attribution[1]" in error["message"]


def test_more_than_10000_intervals_are_refused(client: Client, team: Any, ingest_token: str) -> None:
    before = _counts()
    attribution = [_interval(GPU_A, T + i, T + i + 1, POD) for i in range(10_001)]
    response = post_json(client, URL, _payload(attribution), ingest_token)
    assert response.status_code == 422
    assert response.json()["error"]["path"] == "attribution"
    assert response.json()["error"]["code"] == "too_many"
    assert _counts() == before


def test_a_mig_instance_on_a_gpu_the_host_does_not_have_is_refused(
    client: Client, team: Any, ingest_token: str, other_token: str
) -> None:
    # The parent is registered nowhere: 422.
    payload = _payload([_interval(MIG_1, T, T + 60, POD)])
    payload["accelerators"].append(
        {"uuid": MIG_1, "parent_uuid": "GPU-elsewhere", "mig_mode": True, "compute_slices": 1}
    )
    before = _counts()
    response = post_json(client, URL, payload, ingest_token)
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert (error["path"], error["code"]) == ("attribution[0].gpu", "unknown_parent")
    assert "GPU-elsewhere" in error["message"]
    assert _counts() == before
    # The parent is another team's host's GPU: 409, nothing stored, that host untouched.
    elsewhere = telemetry_payload(n=0, hostname="other-node", start=T)
    elsewhere["accelerators"] = [{"uuid": "GPU-elsewhere", "index": 0}]
    assert post_json(client, URL, elsewhere, other_token).status_code == 200
    before = _counts()
    response = post_json(client, URL, payload, ingest_token)
    assert response.status_code == 409, response.content
    assert response.json()["error"]["path"] == "attribution[0].gpu"
    assert "another host's" in response.json()["error"]["message"]
    assert _counts() == before


def test_a_gpu_of_another_host_of_the_team_is_a_409(client: Client, team: Any, ingest_token: str) -> None:
    assert (
        post_json(client, URL, telemetry_payload(n=2, hostname="node-a", start=T), ingest_token).status_code
        == 200
    )
    payload = _payload([_interval(GPU_A, T, T + 60, POD)], hostname="node-b")
    payload["accelerators"] = []
    payload["samples"] = []
    before = _counts()
    response = post_json(client, URL, payload, ingest_token)
    assert response.status_code == 409, response.content
    error = response.json()["error"]
    assert (error["path"], error["code"]) == ("attribution[0].gpu", "accelerator_conflict")
    assert _counts() == before


def test_a_pod_on_another_teams_gpus_is_refused(
    client: Client, team: Any, ingest_token: str, other_token: str
) -> None:
    assert post_json(client, URL, telemetry_payload(n=2, start=T), ingest_token).status_code == 200
    before = _counts()
    # The host's name resolves within the other token's team (no conflict); its GPUs are the first
    # team's, so the batch and its attribution are refused.
    response = post_json(client, URL, _payload(_batch()), other_token)
    assert response.status_code == 409
    assert response.json()["error"]["path"] == "accelerators[0].uuid"
    assert _counts() == before


def test_a_batch_without_attribution_costs_what_it_cost_before(
    client: Client, team: Any, ingest_token: str
) -> None:
    registrations.clear()
    partition_services.telemetry_partitions_ensure(start=_at(0), end=_at(600))
    assert post_json(client, URL, telemetry_payload(n=4, start=T), ingest_token).status_code == 200
    with CaptureQueriesContext(connection) as plain:
        response = post_json(client, URL, telemetry_payload(n=4, start=T + 2), ingest_token)
    assert response.json().keys() == {"batch_id", "accepted", "duplicate_samples", "duplicate"}
    sql = [query["sql"] for query in plain.captured_queries]
    assert not any("gpuattribution" in text or "fleet_workload" in text for text in sql)
    # With attribution: the host's lock, the stored overlaps, one upsert of the workloads (the
    # COPY is not a captured query) beside the same statements; no device check, as every device
    # named is one the batch lists and registered (or its final statement confirms). Partition
    # catalogue reads are left out: in a test's transaction the days are not remembered, so each
    # range's ensure reads the catalogue (in a web process, no query).
    payload = _payload(_batch())
    payload["samples"] = telemetry_payload(n=4, start=T + 4)["samples"]
    with CaptureQueriesContext(connection) as attributed:
        assert post_json(client, URL, payload, ingest_token).status_code == 200

    def statements(captured: CaptureQueriesContext) -> list[str]:
        return [q["sql"] for q in captured.captured_queries if "pg_inherits" not in q["sql"]]

    assert len(statements(attributed)) == len(statements(plain)) + 3
    assert sum("INSERT INTO fleet_workload" in q["sql"] for q in attributed.captured_queries) == 1


def test_retention_drops_attribution_days_with_telemetrys(
    client: Client, team: Any, ingest_token: str, settings: Any
) -> None:
    settings.TELEMETRY_RETENTION_DAYS = 5
    # Within the seven days one batch's intervals may span.
    old = datetime(2026, 11, 24, 0, 30, tzinfo=UTC).timestamp()
    payload = _payload([_interval(GPU_A, old, old + 60, POD), *_batch()])
    assert post_json(client, URL, payload, ingest_token).status_code == 200
    assert "fleet_gpuattribution_p20261124" in _attribution_partitions()

    dropped = partition_services.telemetry_retention_apply(today=date(2026, 11, 30))

    assert date(2026, 11, 24) in dropped and date(2026, 11, 25) not in dropped
    partitions = _attribution_partitions()
    assert "fleet_gpuattribution_p20261124" not in partitions
    assert {"fleet_gpuattribution_p20261129", "fleet_gpuattribution_p20261130"} <= partitions
    assert _stored() == EXPECTED
    # Workloads outlive their intervals.
    assert Workload.objects.filter(kind="pod").exists()


def test_partitions_are_made_for_the_days_of_intervals_without_samples(
    client: Client, team: Any, ingest_token: str
) -> None:
    day = datetime(2026, 11, 26, 12, tzinfo=UTC)
    assert "fleet_gpuattribution_p20261126" not in _attribution_partitions()
    # Samples on 11-29, an interval on 11-26: the days each needs are made, not those between.
    payload = _payload([_interval(GPU_A, day.timestamp(), day.timestamp() + 60, POD)])
    assert post_json(client, URL, payload, ingest_token).status_code == 200
    partitions = _attribution_partitions()
    assert {"fleet_gpuattribution_p20261126", "fleet_gpuattribution_p20261129"} <= partitions
    assert "fleet_gpuattribution_p20261127" not in partitions
    assert _stored()[0][1:3] == (day, day + timedelta(seconds=60))


def test_staff_read_intervals_and_workloads_in_the_admin(
    client: Client, team: Any, ingest_token: str, admin_client: Client
) -> None:
    assert post_json(client, URL, _payload(_batch()), ingest_token).status_code == 200
    intervals = admin_client.get("/admin/fleet/gpuattribution/")
    assert intervals.status_code == 200
    assert intervals.content.count(b'class="field-basis"') == 5
    workloads = admin_client.get("/admin/fleet/workload/")
    assert (
        workloads.status_code == 200
        and b"vllm-llama-7f9c" in workloads.content
        and b"train-7b" in workloads.content
    )
    assert admin_client.get("/admin/fleet/workload/add/").status_code == 403


def test_mig_instances_are_no_extra_gpus(client: Client, team: Any, ingest_token: str) -> None:
    """A MIG instance registered beside its GPU (named as that GPU, as NVML names it) gets no
    accelerator type, and the overview's GPU count and the hosts grid show the two GPUs, not four."""
    from django.utils import timezone  # noqa: PLC0415

    from accelboard.core.access import scope_for_team  # noqa: PLC0415
    from accelboard.dashboard.selectors import overview_summary  # noqa: PLC0415
    from accelboard.fleet.catalogue_services import accelerator_types_sync  # noqa: PLC0415
    from accelboard.fleet.selectors import host_grid  # noqa: PLC0415

    accelerator_types_sync()
    payload = _payload([_interval(MIG_1, T, T + 60, POD, share=1.0)])
    for gpu in payload["accelerators"]:
        gpu["name"] = "NVIDIA H100 80GB HBM3"
    payload["accelerators"][0].update(mig_mode=True, compute_slices=7)
    payload["accelerators"] += [
        {
            "uuid": uuid,
            "name": "NVIDIA H100 80GB HBM3 MIG 3g.40gb",
            "parent_uuid": GPU_A,
            "mig_mode": True,
            "compute_slices": 3,
        }
        for uuid in (MIG_1, MIG_2)
    ]
    response = post_json(client, URL, payload, ingest_token)
    assert response.status_code == 200, response.content
    types = dict(Accelerator.objects.values_list("uuid", "accelerator_type__name"))
    assert types[GPU_A] is not None and types[GPU_A] == types[GPU_B]
    assert (types[MIG_1], types[MIG_2]) == (None, None)
    scope = scope_for_team(team)
    assert overview_summary(scope=scope)["gpus"] == 2
    [host] = host_grid(scope=scope, now=timezone.now())
    assert len(host["gpus"]) == 2


def _on_host(payload: dict[str, Any], hostname: str, suffix: str) -> dict[str, Any]:
    """``payload`` as another host's: its hostname and GPUs renamed."""
    moved = copy.deepcopy(payload)
    rename = {GPU_A: GPU_A[:-4] + suffix + "a", GPU_B: GPU_B[:-4] + suffix + "b"}
    moved["host"]["hostname"] = hostname
    moved["batch_id"] = f"{hostname}:{payload['batch_id']}"
    for item in [*moved["accelerators"], *moved["samples"], *moved.get("attribution", [])]:
        key = "uuid" if "uuid" in item else "gpu"
        item[key] = rename.get(item[key], item[key])
    return moved


def test_several_hosts_intervals_are_stored_in_one_pass_as_they_would_be_one_by_one(team: Any) -> None:
    """A remote-write request carries hundreds of hosts: their intervals are checked and stored
    together (one lock statement, one read, one upsert, one COPY), each host's as on its own."""
    from accelboard.fleet import ingest_services

    payloads = [_on_host(_payload(_batch()), f"gpu-node-{n:02d}", f"{n:03d}") for n in range(3)]
    with CaptureQueriesContext(connection) as captured:
        results = ingest_services.telemetry_batches_ingest(team_id=team.pk, payloads=payloads)
    assert [(r["attribution"], r["attribution_duplicates"]) for r in results] == [(4, 0)] * 3
    locks = [q["sql"] for q in captured.captured_queries if "pg_advisory_xact_lock(7310002" in q["sql"]]
    assert len(locks) == 1, locks
    stored = _stored()
    assert len(stored) == 3 * len(EXPECTED)
    # Each host's rows are EXPECTED under its GPUs' names.
    for n in range(3):
        mine = [row for row in stored if row[0].endswith((f"{n:03d}a", f"{n:03d}b"))]
        assert [row[1:] for row in mine] == [row[1:] for row in EXPECTED]
    # Sent again: duplicates, nothing stored twice.
    again = [dict(p, batch_id=p["batch_id"] + ":again") for p in payloads]
    results = ingest_services.telemetry_batches_ingest(team_id=team.pk, payloads=again)
    assert [(r["attribution"], r["attribution_duplicates"]) for r in results] == [(0, 4)] * 3
    assert len(_stored()) == 3 * len(EXPECTED)


def test_a_conflict_in_one_hosts_intervals_names_its_batch_and_stores_none(team: Any) -> None:
    from accelboard.fleet import ingest_services

    first = _on_host(_payload([_interval(GPU_A, T, T + 60, POD)]), "gpu-node-01", "001")
    ingest_services.telemetry_batches_ingest(team_id=team.pk, payloads=[first])
    before = _counts()
    clean = _on_host(_payload(_batch()), "gpu-node-02", "002")
    clash = _on_host(_payload([_interval(GPU_A, T + 30, T + 90, PROCESS)]), "gpu-node-01", "001")
    with pytest.raises(ingest_services.IngestRejected) as refused:
        ingest_services.telemetry_batches_ingest(team_id=team.pk, payloads=[clean, clash])
    assert (refused.value.index, refused.value.code, refused.value.path) == (
        1,
        "attribution_conflict",
        "attribution[0]",
    )
    assert POD["uid"] in refused.value.message
    assert _counts() == before
    # Two batches of one host in one call: the second is checked against the first's intervals.
    again = _on_host(_payload([_interval(GPU_B, T, T + 60, JOB)]), "gpu-node-03", "003")
    overlap = _on_host(_payload([_interval(GPU_B, T + 10, T + 20, PROCESS)]), "gpu-node-03", "003")
    overlap["batch_id"] += ":2"
    with pytest.raises(ingest_services.IngestRejected) as refused:
        ingest_services.telemetry_batches_ingest(team_id=team.pk, payloads=[again, overlap])
    assert (refused.value.index, refused.value.code) == (1, "attribution_conflict")
    assert _counts() == before
