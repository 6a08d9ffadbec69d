"""Attribution intervals: coalescing observations, time-averaged shares, cuts at batch
boundaries through the spool (nothing lost, nothing twice), and an agent restarting."""

from __future__ import annotations

import json

from accelboard_agent.intervals import EVEN, EXCLUSIVE, MEASURED, Holding, segment_observe, shares_split
from accelboard_agent.spool import Spool

GPU = "GPU-8f0c0000-0000-0000-0000-000000000001"
A = {"kind": "pod", "uid": "llm/vllm-0", "namespace": "llm", "name": "vllm-0", "container": "vllm"}
B = {"kind": "slurm-job", "uid": "4242", "user": "alice", "account": "nlp", "partition": "gpu"}


def _observations() -> list[tuple[float, list[Holding]]]:
    """A alone (SM 50 % then 70 %), then A and B sharing by measured SM (60:20, then 30:30), then nobody."""
    return [
        (100.0, [Holding(A, 1.0, EXCLUSIVE, memory_bytes=10, sm_util=50.0)]),
        (105.0, [Holding(A, 1.0, EXCLUSIVE, memory_bytes=20, sm_util=70.0)]),
        (110.0, [Holding(A, 0.75, MEASURED, 30, 60.0), Holding(B, 0.25, MEASURED, 40, 20.0)]),
        (115.0, [Holding(A, 0.5, MEASURED, 30, 30.0), Holding(B, 0.5, MEASURED, 50, 30.0)]),
        (120.0, []),
    ]


def _brief(intervals: list[dict]) -> list[tuple]:
    return [
        (
            i["workload"]["uid"],
            i["start"],
            i["end"],
            i["share"],
            i["basis"],
            i.get("sm_util"),
            i.get("memory_bytes"),
        )
        for i in intervals
    ]


def test_it_coalesces_same_holders_into_one_interval_with_time_averaged_shares():
    segment = None
    closed: list[dict] = []
    for at, holdings in _observations():
        done, segment = segment_observe(segment, gpu=GPU, at=at, holdings=holdings)
        closed += done

    assert segment is None  # nobody holds it: idle, no open interval
    # By hand: A alone 100-110, SM (50x5 + 70x5)/10 = 60. Then A (0.75x5 + 0.5x5)/10 = 0.625 of the
    # device, SM (60x5 + 30x5)/10 = 45; B 0.375, SM 25. A device's shares at any instant add to 1.
    assert _brief(closed) == [
        ("llm/vllm-0", 100.0, 110.0, 1.0, "exclusive", 60.0, 20),
        ("llm/vllm-0", 110.0, 120.0, 0.625, "measured", 45.0, 30),
        ("4242", 110.0, 120.0, 0.375, "measured", 25.0, 50),
    ]
    assert closed[2]["workload"] == B and closed[0]["gpu"] == GPU


def test_it_splits_by_measured_sm_or_evenly_and_says_which():
    assert shares_split({"a": {"sm_util": 80.0}}, measured=True) == [("a", 1.0, EXCLUSIVE)]
    assert shares_split({"a": {"sm_util": 60.0}, "b": {"sm_util": 20.0}}, measured=True) == [
        ("a", 0.75, MEASURED),
        ("b", 0.25, MEASURED),
    ]
    # A holder that ran nothing while the other did holds no measured share.
    assert shares_split({"a": {"sm_util": 0.0}, "b": {"sm_util": 20.0}}, measured=True) == [
        ("b", 1.0, MEASURED)
    ]
    # Not measured, or measured idle: even.
    assert shares_split(
        {"a": {"sm_util": None}, "b": {"sm_util": None}, "c": {"sm_util": None}}, measured=False
    ) == [
        ("a", 1 / 3, EVEN),
        ("b", 1 / 3, EVEN),
        ("c", 1 / 3, EVEN),
    ]
    assert shares_split({"a": {"sm_util": 0.0}, "b": {"sm_util": 0.0}}, measured=True)[0][2] == EVEN


def test_it_rounds_shares_down_so_a_device_never_holds_more_than_all_of_it():
    segment = None
    thirds = [Holding({"kind": "process", "uid": f"{n}@1"}, 1 / 3, EVEN) for n in range(3)]
    _, segment = segment_observe(segment, gpu=GPU, at=0.0, holdings=thirds)
    closed, _ = segment_observe(segment, gpu=GPU, at=7.0, holdings=[])

    assert [i["share"] for i in closed] == [0.333333] * 3
    assert sum(i["share"] for i in closed) <= 1.0


def _spooled_batches(tmp_path, *, seal_every: int) -> tuple[list[dict], Spool]:
    spool = Spool(str(tmp_path / "spool.db"))
    spool.facts_set(host={"hostname": "h1", "facts": {}}, accelerators=[{"uuid": GPU}])
    batches = []
    for number, (at, holdings) in enumerate(_observations(), start=1):
        spool.samples_add([{"gpu": GPU, "time": at, "power_w": 300.0}])
        spool.attribution_observe(at=at, holdings={GPU: holdings})
        if number % seal_every == 0:
            batch_id = spool.telemetry_seal(hostname="h1", max_samples=100)
            batches.append(json.loads(spool.outbox_get(batch_id)["payload"]))
    batch_id = spool.telemetry_seal(hostname="h1", max_samples=100)
    if batch_id:
        batches.append(json.loads(spool.outbox_get(batch_id)["payload"]))
    return batches, spool


def test_it_cuts_open_intervals_at_each_batch_and_loses_or_repeats_nothing(tmp_path):
    batches, spool = _spooled_batches(tmp_path, seal_every=2)

    # Batches end at samples 105, 115 and 120; each carries what was held up to its last sample.
    assert [b["samples"][-1]["time"] for b in batches] == [105.0, 115.0, 120.0]
    assert [_brief(b.get("attribution", [])) for b in batches] == [
        [("llm/vllm-0", 100.0, 105.0, 1.0, "exclusive", 50.0, 10)],
        [
            ("llm/vllm-0", 105.0, 110.0, 1.0, "exclusive", 70.0, 20),
            ("llm/vllm-0", 110.0, 115.0, 0.75, "measured", 60.0, 30),
            ("4242", 110.0, 115.0, 0.25, "measured", 20.0, 40),
        ],
        [
            ("llm/vllm-0", 115.0, 120.0, 0.5, "measured", 30.0, 30),
            ("4242", 115.0, 120.0, 0.5, "measured", 30.0, 50),
        ],
    ]
    # The same GPU-seconds as uncut: A 10 + 0.625 x 10 = 16.25 s, B 3.75 s.
    held: dict[str, float] = {}
    for batch in batches:
        for item in batch.get("attribution", []):
            uid = item["workload"]["uid"]
            held[uid] = held.get(uid, 0.0) + item["share"] * (item["end"] - item["start"])
    assert held == {"llm/vllm-0": 16.25, "4242": 3.75}
    # Nothing left behind, nothing to send twice.
    assert spool.db.execute("SELECT count(*) FROM attribution").fetchone()[0] == 0
    assert spool.db.execute("SELECT count(*) FROM attribution_open").fetchone()[0] == 0
    assert spool.telemetry_seal(hostname="h1", max_samples=100) is None


def test_a_steady_holding_is_cut_only_once_it_has_run_the_cut_interval(tmp_path):
    """A GPU held by one pod for 20 min, a batch every 5 s: with the 300 s cut interval the pod's
    holding travels in four intervals (not 240), each in one batch, adding up to the 20 min."""
    spool = Spool(str(tmp_path / "spool.db"))
    spool.facts_set(host={"hostname": "h1", "facts": {}}, accelerators=[{"uuid": GPU}])
    intervals = []
    for tick in range(241):
        at = 1_000.0 + 5.0 * tick
        spool.samples_add([{"gpu": GPU, "time": at}])
        spool.attribution_observe(at=at, holdings={GPU: [Holding(A, 1.0, EXCLUSIVE)]})
        batch_id = spool.telemetry_seal(hostname="h1", max_samples=100, cut_after=300.0)
        intervals += json.loads(spool.outbox_get(batch_id)["payload"]).get("attribution", [])

    assert [(i["start"], i["end"]) for i in intervals] == [
        (1_000.0, 1_300.0),
        (1_300.0, 1_600.0),
        (1_600.0, 1_900.0),
        (1_900.0, 2_200.0),
    ]
    # A change of holders is sent at once, however short the holding; ``flush`` (cut_after 0)
    # sends the open part too.
    spool.samples_add([{"gpu": GPU, "time": 2_205.0}])
    spool.attribution_observe(at=2_205.0, holdings={GPU: [Holding(B, 1.0, EXCLUSIVE)]})
    spool.samples_add([{"gpu": GPU, "time": 2_210.0}])
    spool.attribution_observe(at=2_210.0, holdings={GPU: [Holding(B, 1.0, EXCLUSIVE)]})
    batch_id = spool.telemetry_seal(hostname="h1", max_samples=100, cut_after=300.0)
    changed = json.loads(spool.outbox_get(batch_id)["payload"])["attribution"]
    assert [(i["workload"]["uid"], i["start"], i["end"]) for i in changed] == [
        ("llm/vllm-0", 2_200.0, 2_205.0)
    ]
    spool.samples_add([{"gpu": GPU, "time": 2_215.0}])
    batch_id = spool.telemetry_seal(hostname="h1", max_samples=100, cut_after=0.0)
    flushed = json.loads(spool.outbox_get(batch_id)["payload"])["attribution"]
    assert [(i["workload"]["uid"], i["start"], i["end"]) for i in flushed] == [("4242", 2_205.0, 2_215.0)]


def test_an_interval_carries_the_workloads_latest_labels():
    """A pod first seen before its labels were read keeps one interval, sent with the labels."""
    bare = {"kind": "pod", "uid": "llm/vllm-0", "namespace": "llm", "name": "vllm-0", "container": "vllm"}
    labelled = {**bare, "labels": {"team": "llm"}}
    closed, segment = segment_observe(None, gpu=GPU, at=100.0, holdings=[Holding(bare, 1.0, EXCLUSIVE)])
    closed, segment = segment_observe(
        segment, gpu=GPU, at=105.0, holdings=[Holding(labelled, 1.0, EXCLUSIVE)]
    )
    assert closed == []
    closed, segment = segment_observe(segment, gpu=GPU, at=110.0, holdings=[])
    assert segment is None
    assert [(i["start"], i["end"], i["workload"]) for i in closed] == [(100.0, 110.0, labelled)]


def test_a_restarted_agent_ends_what_it_left_open_at_its_last_observation(tmp_path):
    spool = Spool(str(tmp_path / "spool.db"))
    spool.facts_set(host={"hostname": "h1", "facts": {}}, accelerators=[{"uuid": GPU}])
    for at in (100.0, 105.0, 110.0):
        spool.samples_add([{"gpu": GPU, "time": at}])
        spool.attribution_observe(at=at, holdings={GPU: [Holding(A, 1.0, EXCLUSIVE)]})
    spool.close()

    spool = Spool(str(tmp_path / "spool.db"))
    assert spool.attribution_close_stale() == 1
    spool.samples_add([{"gpu": GPU, "time": 130.0}])
    batch = json.loads(spool.outbox_get(spool.telemetry_seal(hostname="h1", max_samples=100))["payload"])

    # Seen from 100 to its last observation at 110; what came after (the agent down) is unknown.
    assert _brief(batch["attribution"]) == [("llm/vllm-0", 100.0, 110.0, 1.0, "exclusive", None, None)]


def test_a_batch_without_attribution_has_no_attribution_key(tmp_path):
    spool = Spool(str(tmp_path / "spool.db"))
    spool.facts_set(host={"hostname": "h1", "facts": {}}, accelerators=[{"uuid": GPU}])
    spool.samples_add([{"gpu": GPU, "time": 100.0}])

    batch = json.loads(spool.outbox_get(spool.telemetry_seal(hostname="h1", max_samples=100))["payload"])

    assert "attribution" not in batch  # what today's server accepts, with every source off
