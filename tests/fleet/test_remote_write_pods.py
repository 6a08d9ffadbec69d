"""dcgm-exporter's pod labels as attribution intervals, without the database
(accelboard/fleet/remote_write_pods.py, through remote_write.dcgm_map)."""

from __future__ import annotations

from typing import Any

import pytest

from accelboard.fleet.remote_write import LabelNames, Series, WriteRejected, dcgm_map
from accelboard.fleet.remote_write_pods import (
    MAX_RUN_MS,
    PodInterval,
    StoredInterval,
    mig_slices,
    pod_intervals,
    pod_intervals_extend,
    pod_intervals_trim,
)

T0 = 1_764_454_200_000  # ms
S = 15_000
GPU = {"UUID": "GPU-aaaa", "Hostname": "node-1", "gpu": "0", "modelName": "NVIDIA H100 80GB HBM3"}
LLAMA = {"pod": "llama-7f9c", "namespace": "serving", "container": "vllm"}
IDLE = {"pod": "", "namespace": "", "container": ""}
LLAMA_WORKLOAD = {"kind": "pod", "uid": "serving/llama-7f9c", "name": "llama-7f9c", "namespace": "serving",
                  "container": "vllm"}  # fmt: skip


def util(stamps: list[int], names: LabelNames | None = None, **labels: str) -> Series:
    return Series({"__name__": "DCGM_FI_DEV_GPU_UTIL", **GPU, **labels}, [(ms, 50.0) for ms in stamps])


def intervals(
    series: list[Series], names: LabelNames | None = None, scrape_ms: int = S
) -> list[dict[str, Any]]:
    (batch,) = dcgm_map(series, names=names or LabelNames()).hosts
    return [
        item
        for interval in pod_intervals(batch.holders, scrape_ms=scrape_ms)
        for item in interval.attribution()
    ]


def spans(items: list[dict[str, Any]]) -> list[tuple[str, float, float, str]]:
    return [(i["gpu"], i["start"] * 1000 - T0, i["end"] * 1000 - T0, i["workload"]["uid"]) for i in items]


def test_a_pod_holds_its_gpu_from_each_instant_to_the_next_merged_into_one_exclusive_interval() -> None:
    (item,) = intervals([util([T0, T0 + S, T0 + 2 * S], **LLAMA)])
    assert item == {"gpu": "GPU-aaaa", "start": T0 / 1000, "end": (T0 + 3 * S) / 1000,
                    "workload": LLAMA_WORKLOAD, "share": 1.0, "basis": "exclusive"}  # fmt: skip


def test_an_idle_instant_ends_the_holding_and_a_new_pod_starts_a_new_interval() -> None:
    other = {**LLAMA, "pod": "ft-0", "container": ""}
    items = intervals([util([T0, T0 + S], **LLAMA), util([T0 + 2 * S], **IDLE), util([T0 + 3 * S], **other)])
    assert spans(items) == [
        ("GPU-aaaa", 0, 2 * S, "serving/llama-7f9c"),
        ("GPU-aaaa", 3 * S, 4 * S, "serving/ft-0"),
    ]
    assert "container" not in items[1]["workload"]
    assert intervals([util([T0, T0 + S], **IDLE)]) == []
    assert intervals([util([T0])]) == []  # no pod labels at all: nothing


def test_the_step_is_the_gap_to_the_next_instant_at_most_the_scrape_interval() -> None:
    # 10 s apart (shorter than the setting): each holds to the next; 40 s apart (a missed scrape):
    # the holding ends after one scrape interval, and the time between is nobody's.
    items = intervals([util([T0, T0 + 10_000, T0 + 50_000], **LLAMA)])
    assert spans(items) == [("GPU-aaaa", 0, 25_000, "serving/llama-7f9c"),
                            ("GPU-aaaa", 50_000, 65_000, "serving/llama-7f9c")]  # fmt: skip
    # Another GPU's instants in the request do not make this one's step.
    other = {**GPU, "UUID": "GPU-bbbb", "gpu": "1"}
    mixed = [
        util([T0], **LLAMA),
        Series({"__name__": "DCGM_FI_DEV_GPU_UTIL", **other, **IDLE}, [(T0 + 1000, 1.0)]),
    ]
    assert spans(intervals(mixed)) == [("GPU-aaaa", 0, S, "serving/llama-7f9c")]


def test_two_requests_in_sequence_give_contiguous_intervals_and_a_split_instant_the_same_one() -> None:
    first = spans(intervals([util([T0, T0 + S], **LLAMA)]))
    second = spans(intervals([util([T0 + 2 * S, T0 + 3 * S], **LLAMA)]))
    assert first[-1][2] == second[0][1] == 2 * S
    # One instant's series split over two requests: each part gives the same interval.
    power = Series({"__name__": "DCGM_FI_DEV_POWER_USAGE", **GPU, **LLAMA}, [(T0, 300.0)])
    assert (
        spans(intervals([power]))
        == spans(intervals([util([T0], **LLAMA)]))
        == [("GPU-aaaa", 0, S, "serving/llama-7f9c")]
    )


def test_every_series_of_an_instant_counts_once_and_two_containers_of_one_pod_are_one_holder() -> None:
    power = Series(
        {"__name__": "DCGM_FI_DEV_POWER_USAGE", **GPU, **LLAMA, "container": "sidecar"}, [(T0, 300.0)]
    )
    (item,) = intervals([util([T0], **LLAMA), power])
    assert item["workload"] == {k: v for k, v in LLAMA_WORKLOAD.items() if k != "container"}


def test_two_pods_at_one_instant_share_the_gpu_evenly() -> None:
    other = {**LLAMA, "pod": "embed-0", "container": "tei"}
    items = intervals([util([T0], **LLAMA), util([T0], **other)])
    assert [(i["workload"]["uid"], i["share"], i["basis"]) for i in items] == [
        ("serving/embed-0", 0.5, "even"),
        ("serving/llama-7f9c", 0.5, "even"),
    ]


def test_mig_instances_hold_their_own_pods_and_carry_their_slices() -> None:
    mig = {**GPU, "UUID": "GPU-a100", "modelName": "NVIDIA A100-SXM4-80GB", "GPU_I_PROFILE": "3g.40gb"}
    series = [
        Series({"__name__": "DCGM_FI_DEV_GPU_UTIL", **mig, "GPU_I_ID": "1", **LLAMA}, [(T0, 1.0)]),
        Series({"__name__": "DCGM_FI_DEV_GPU_UTIL", **mig, "GPU_I_ID": "2", **IDLE}, [(T0, 1.0)]),
    ]
    (batch,) = dcgm_map(series, names=LabelNames()).hosts
    assert batch.accelerators["GPU-a100/gi1"]["compute_slices"] == 3
    assert batch.accelerators["GPU-a100"]["compute_slices"] == 7
    assert spans(intervals(series)) == [("GPU-a100/gi1", 0, S, "serving/llama-7f9c")]
    assert mig_slices(profile="1g.10gb", model="NVIDIA A30") == (1, 4)
    assert mig_slices(profile="", model="Some GPU") == (None, None)


def test_it_reads_exported_and_configured_pod_labels() -> None:
    # honor_labels: false renames the exporter's own labels exported_*: those win.
    exported = {"pod": "dcgm-exporter-x1", "namespace": "gpu-operator", "exported_pod": "llama-7f9c",
                "exported_namespace": "serving"}  # fmt: skip
    assert spans(intervals([util([T0], **exported)])) == [("GPU-aaaa", 0, S, "serving/llama-7f9c")]
    names = LabelNames(pod="k8s_pod", namespace="k8s_ns", container="k8s_container")
    renamed = {"k8s_pod": "llama-7f9c", "k8s_ns": "serving", "pod": "ignored"}
    assert spans(intervals([util([T0], **renamed)], names=names)) == [
        ("GPU-aaaa", 0, S, "serving/llama-7f9c")
    ]


def test_a_pod_label_the_attribution_would_refuse_is_a_refusal_naming_the_series() -> None:
    with pytest.raises(WriteRejected, match=r'DCGM_FI_DEV_GPU_UTIL\{.*pod="bad\x07"\}: a pod label'):
        dcgm_map([util([T0], pod="bad\x07")], names=LabelNames())


def test_a_long_holding_is_cut_into_runs_of_at_most_an_hour() -> None:
    stamps = list(range(T0, T0 + 2 * MAX_RUN_MS, S))
    items = intervals([util(stamps, **LLAMA)])
    assert spans(items) == [("GPU-aaaa", 0, MAX_RUN_MS, "serving/llama-7f9c"),
                            ("GPU-aaaa", MAX_RUN_MS, 2 * MAX_RUN_MS, "serving/llama-7f9c")]  # fmt: skip


def test_trim_keeps_only_what_the_stored_intervals_leave_uncovered() -> None:
    workloads = (LLAMA_WORKLOAD,)
    new = [PodInterval("g", 0, 100, workloads), PodInterval("h", 0, 100, workloads)]
    stored = {"g": [(10, 20), (50, 60), (90, 200)]}
    out = pod_intervals_trim(new, stored=stored)
    assert [(i.gpu, i.start_ms, i.end_ms) for i in out] == [
        ("g", 0, 10),
        ("g", 20, 50),
        ("g", 60, 90),
        ("h", 0, 100),
    ]
    assert pod_intervals_trim([PodInterval("g", 10, 20, workloads)], stored=stored) == []  # stored: nothing


def test_extend_continues_a_stored_row_of_the_same_lone_pod_within_its_day_and_an_hour() -> None:
    key = ("pod", "serving/llama-7f9c")
    row = StoredInterval(7, "g", T0, T0 + S, key, 1.0, "exclusive")
    llama = (LLAMA_WORKLOAD,)
    # Two pieces in a row continue it (the second from the first's end); one after a gap does not.
    extended, rest = pod_intervals_extend(
        [PodInterval("g", T0 + S, T0 + 2 * S, llama), PodInterval("g", T0 + 2 * S, T0 + 3 * S, llama),
         PodInterval("g", T0 + 4 * S, T0 + 5 * S, llama)],
        stored=[row],
    )  # fmt: skip
    assert extended == [(row, T0 + 3 * S)]
    assert [(i.start_ms, i.end_ms) for i in rest] == [(T0 + 4 * S, T0 + 5 * S)]
    other = ({**LLAMA_WORKLOAD, "uid": "serving/other"},)
    day_end = (T0 // 86_400_000 + 1) * 86_400_000
    for interval, rows in [
        (PodInterval("g", T0 + S, T0 + 2 * S, other), [row]),  # another pod
        (PodInterval("g", T0 + S, T0 + 2 * S, (LLAMA_WORKLOAD, other[0])), [row]),  # shared
        (PodInterval("g", T0 + S, T0 + MAX_RUN_MS + 1, llama), [row]),  # over an hour
        (PodInterval("g", T0 + S, T0 + 2 * S, llama), [StoredInterval(7, "g", T0, T0 + S, key, 0.5, "even")]),
        (PodInterval("g", day_end, day_end + S, llama), [StoredInterval(7, "g", day_end - S, day_end, key, 1.0, "exclusive")]),
        (PodInterval("h", T0 + S, T0 + 2 * S, llama), [row]),  # another device
    ]:  # fmt: skip
        assert pod_intervals_extend([interval], stored=rows) == ([], [interval])


def test_no_interval_ends_past_the_latest_end_given() -> None:
    (batch,) = dcgm_map([util([T0, T0 + S], **LLAMA)], names=LabelNames()).hosts
    (interval,) = pod_intervals(batch.holders, scrape_ms=S, until_ms=T0 + S + 1000)
    assert (interval.start_ms, interval.end_ms) == (T0, T0 + S + 1000)
    assert pod_intervals(batch.holders, scrape_ms=S, until_ms=T0) == []
