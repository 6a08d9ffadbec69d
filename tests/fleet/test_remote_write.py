"""Remote-write decoding and dcgm-exporter mapping, without the database (accelboard/fleet/remote_write.py)."""

from __future__ import annotations

import math
import struct

import pytest

from accelboard.fleet.remote_write import (
    MIB,
    LabelNames,
    WriteRejected,
    dcgm_map,
    labels_text,
    snappy_decode,
    write_request_decode,
)
from tests.fleet.prom_wire import STALE_NAN, snappy, write_request

T0 = 1_764_454_200_000  # ms
GPU = {"UUID": "GPU-aaaa", "Hostname": "node-1", "gpu": "0", "modelName": "NVIDIA H100 80GB HBM3"}


def series(metric: str, samples: list[tuple[int, float]], **labels: str) -> tuple[dict[str, str], list]:
    return {"__name__": metric, **GPU, **labels}, samples


def test_it_decodes_labels_and_samples_and_skips_what_it_does_not_read() -> None:
    body = write_request(
        [series("DCGM_FI_DEV_POWER_USAGE", [(T0, 301.25), (T0 + 1000, 0.0), (-1500, 7.5)])], extras=True
    )
    (decoded,) = write_request_decode(snappy_decode(snappy(body), max_bytes=1 << 20))
    assert decoded.labels == {"__name__": "DCGM_FI_DEV_POWER_USAGE", **GPU}
    assert decoded.samples == [(T0, 301.25), (T0 + 1000, 0.0), (-1500, 7.5)]
    assert decoded.stale == 0


def test_it_drops_stale_markers_but_keeps_other_nans_for_the_mapper() -> None:
    body = write_request([series("DCGM_FI_DEV_GPU_UTIL", [(T0, STALE_NAN), (T0 + 1000, float("nan"))])])
    (decoded,) = write_request_decode(body)
    assert decoded.stale == 1
    assert len(decoded.samples) == 1 and math.isnan(decoded.samples[0][1])
    with pytest.raises(WriteRejected) as caught:
        dcgm_map([decoded], names=LabelNames())
    assert caught.value.status == 400
    assert 'DCGM_FI_DEV_GPU_UTIL{Hostname="node-1", UUID="GPU-aaaa"' in caught.value.message


@pytest.mark.parametrize("value", [float("inf"), float("-inf")])
def test_it_refuses_infinite_values_of_mapped_metrics(value: float) -> None:
    decoded = write_request_decode(write_request([series("DCGM_FI_DEV_POWER_USAGE", [(T0, value)])]))
    with pytest.raises(WriteRejected, match="DCGM_FI_DEV_POWER_USAGE"):
        dcgm_map(decoded, names=LabelNames())


def test_it_refuses_what_is_not_snappy_or_not_protobuf() -> None:
    with pytest.raises(WriteRejected) as caught:
        snappy_decode(b"\x05not snappy at all", max_bytes=1 << 20)
    assert (caught.value.status, caught.value.code) == (400, "bad_encoding")
    with pytest.raises(WriteRejected) as caught:
        snappy_decode(b"", max_bytes=1 << 20)
    assert caught.value.code == "bad_encoding"
    with pytest.raises(WriteRejected) as caught:
        write_request_decode(b"\x0a\xff\x01abc")  # a field claiming 255 bytes, 3 there
    assert (caught.value.status, caught.value.code) == (400, "bad_protobuf")
    with pytest.raises(WriteRejected, match="not a protobuf prometheus.WriteRequest"):
        write_request_decode(b"\x0b")  # a group


def test_it_refuses_a_body_whose_decompressed_size_is_over_the_limit_before_decompressing() -> None:
    body = snappy(write_request([series("DCGM_FI_DEV_POWER_USAGE", [(T0 + i, 1.0) for i in range(500)])]))
    with pytest.raises(WriteRejected) as caught:
        snappy_decode(body, max_bytes=1000)
    assert caught.value.status == 413 and "at most 1,000" in caught.value.message


def test_it_groups_one_scrape_of_each_gpu_into_one_sample() -> None:
    values = {
        "DCGM_FI_DEV_POWER_USAGE": 412.5,
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 123456789.0,
        "DCGM_FI_DEV_GPU_UTIL": 97.0,
        "DCGM_FI_DEV_MEM_COPY_UTIL": 41.0,
        "DCGM_FI_DEV_FB_USED": 58368.0,
        "DCGM_FI_DEV_FB_FREE": 23000.0,
        "DCGM_FI_DEV_FB_RESERVED": 191.0,
        "DCGM_FI_DEV_SM_CLOCK": 1980.0,
        "DCGM_FI_DEV_MEM_CLOCK": 2619.0,
        "DCGM_FI_DEV_GPU_TEMP": 61.0,
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": 4.0,
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 0.0,
    }
    other = {**GPU, "UUID": "GPU-bbbb", "gpu": "1"}
    decoded = write_request_decode(
        write_request(
            [series(name, [(T0, value), (T0 + 15_000, value + 1)]) for name, value in values.items()]
            + [({"__name__": "DCGM_FI_DEV_POWER_USAGE", **other}, [(T0, 99.0)])]
            + [({"__name__": "go_goroutines", "instance": "x"}, [(T0, 12.0)])]
            + [series("DCGM_FI_DEV_XID_ERRORS", [(T0, 79.0)])]
        )
    )
    mapped = dcgm_map(decoded, names=LabelNames())
    (host,) = mapped.hosts
    assert host.hostname == "node-1"
    assert host.accelerators == {
        "GPU-aaaa": {"uuid": "GPU-aaaa", "index": 0, "name": "NVIDIA H100 80GB HBM3"},
        "GPU-bbbb": {"uuid": "GPU-bbbb", "index": 1, "name": "NVIDIA H100 80GB HBM3"},
    }
    assert host.samples[0] == {
        "time": T0 / 1000,
        "gpu": "GPU-aaaa",
        "power_w": 412.5,
        "energy_mj": 123456789,
        "gpu_util": 97.0,
        "mem_util": 41.0,
        "mem_used_bytes": 58368 * MIB,
        "mem_free_bytes": 23000 * MIB,
        "mem_reserved_bytes": 191 * MIB,
        "mem_total_bytes": (58368 + 23000 + 191) * MIB,
        "sm_clock_mhz": 1980.0,
        "mem_clock_mhz": 2619.0,
        "temperature_c": 61.0,
        "throttle_reasons": 4,
        "ecc_errors": 0,
    }
    assert host.samples[1]["time"] == (T0 + 15_000) / 1000 and host.samples[1]["power_w"] == 413.5
    assert host.samples[2] == {"time": T0 / 1000, "gpu": "GPU-bbbb", "power_w": 99.0}
    assert len(host.samples) == 3
    assert mapped.samples == 2 * len(values) + 1
    assert mapped.unknown == {"go_goroutines": 1, "DCGM_FI_DEV_XID_ERRORS": 1}
    # What the mapping did not read goes on (to serving's mapping), nothing else.
    assert [item.name for item in mapped.others] == ["go_goroutines", "DCGM_FI_DEV_XID_ERRORS"]
    assert host.sources[0]["power_w"]["__name__"] == "DCGM_FI_DEV_POWER_USAGE"


def test_one_gpu_instant_under_two_label_sets_is_one_row_through_either_path() -> None:
    # Two jobs scrape one exporter (``instance`` differs): one GPU, one instant, one row; the
    # second decode of the same bytes reads the label sets from the cache.
    body = write_request(
        [
            series("DCGM_FI_DEV_POWER_USAGE", [(T0, 300.0), (T0 + 15_000, 301.0)], instance="a:9400"),
            series("DCGM_FI_DEV_GPU_UTIL", [(T0, 55.0)], instance="b:9400"),
            series("DCGM_FI_DEV_GPU_TEMP", [(T0 + 15_000, 60.0)], instance="b:9400"),
        ]
    )
    for _ in range(2):
        (host,) = dcgm_map(write_request_decode(body), names=LabelNames()).hosts
        assert host.samples == [
            {"time": T0 / 1000, "gpu": "GPU-aaaa", "power_w": 300.0, "gpu_util": 55.0},
            {"time": (T0 + 15_000) / 1000, "gpu": "GPU-aaaa", "power_w": 301.0, "temperature_c": 60.0},
        ]
        assert host.sources[0]["gpu_util"]["instance"] == "b:9400"
        assert host.sources[0]["power_w"]["instance"] == "a:9400"


def test_it_names_gpus_without_uuid_by_host_and_index_and_mig_instances_under_their_gpu() -> None:
    no_uuid = {"__name__": "DCGM_FI_DEV_GPU_TEMP", "Hostname": "node-2", "gpu": "3"}
    mig = {**GPU, "__name__": "DCGM_FI_DEV_FB_USED", "GPU_I_ID": "2", "GPU_I_PROFILE": "1g.10gb"}
    mapped = dcgm_map(
        write_request_decode(write_request([(no_uuid, [(T0, 50.0)]), (mig, [(T0, 1024.0)])])),
        names=LabelNames(),
    )
    by_host = {host.hostname: host for host in mapped.hosts}
    assert by_host["node-2"].samples == [{"time": T0 / 1000, "gpu": "prom:node-2:3", "temperature_c": 50.0}]
    assert by_host["node-1"].accelerators == {
        "GPU-aaaa": {"uuid": "GPU-aaaa", "index": 0, "name": "NVIDIA H100 80GB HBM3", "mig_mode": True,
                     "compute_slices": 7},
        "GPU-aaaa/gi2": {"uuid": "GPU-aaaa/gi2", "parent_uuid": "GPU-aaaa", "name": "NVIDIA H100 80GB HBM3 MIG 1g.10gb",
                         "compute_slices": 1},
    }  # fmt: skip
    assert by_host["node-1"].samples == [
        {"time": T0 / 1000, "gpu": "GPU-aaaa/gi2", "mem_used_bytes": 1024 * MIB}
    ]


def test_it_reads_exported_labels_and_configured_names() -> None:
    labels = {
        "__name__": "DCGM_FI_DEV_POWER_USAGE",
        "Hostname": "prometheus-target",
        "exported_Hostname": "node-9",
        "gpu_uuid": "GPU-cccc",
        "gpu": "0",
    }
    mapped = dcgm_map(
        write_request_decode(write_request([(labels, [(T0, 5.0)])])), names=LabelNames(uuid="gpu_uuid")
    )
    (host,) = mapped.hosts
    assert host.hostname == "node-9"
    assert host.samples[0]["gpu"] == "GPU-cccc"


def test_it_refuses_a_series_without_a_gpu_or_a_host_naming_its_labels() -> None:
    no_gpu = {"__name__": "DCGM_FI_DEV_POWER_USAGE", "Hostname": "node-1"}
    with pytest.raises(WriteRejected) as caught:
        dcgm_map(write_request_decode(write_request([(no_gpu, [(T0, 5.0)])])), names=LabelNames())
    assert caught.value.message.startswith('series DCGM_FI_DEV_POWER_USAGE{Hostname="node-1"} names no GPU')
    no_host = {"__name__": "DCGM_FI_DEV_POWER_USAGE", "UUID": "GPU-1"}
    with pytest.raises(WriteRejected, match="no 'Hostname' label"):
        dcgm_map(write_request_decode(write_request([(no_host, [(T0, 5.0)])])), names=LabelNames())


def test_labels_text_reads_like_prometheus() -> None:
    assert labels_text({"b": "2", "__name__": "m", "a": "1"}) == 'm{a="1", b="2"}'


def test_it_reads_fields_in_any_order_and_negative_timestamps() -> None:
    from tests.fleet.prom_wire import _delimited, _varint

    # A sample with its timestamp first and an unknown field; a label after the samples.
    sample = _varint(2 << 3 | 0) + _varint(-2000) + _varint(1 << 3 | 1) + struct.pack("<d", 2.5)
    sample += _varint(7 << 3 | 0) + _varint(1)
    label = _delimited(1, _delimited(1, b"__name__") + _delimited(2, b"DCGM_FI_DEV_GPU_TEMP"))
    late = _delimited(1, _delimited(1, b"Hostname") + _delimited(2, b"node-late"))
    body = _delimited(1, label + _delimited(2, sample) + late)
    (decoded,) = write_request_decode(body)
    assert decoded.labels == {"__name__": "DCGM_FI_DEV_GPU_TEMP", "Hostname": "node-late"}
    assert decoded.samples == [(-2000, 2.5)]
    # The same label bytes again come from the cache, equal and unchanged by the late label.
    (again,) = write_request_decode(_delimited(1, label + _delimited(2, sample)))
    assert again.labels == {"__name__": "DCGM_FI_DEV_GPU_TEMP"}


def test_it_reads_labels_longer_than_a_one_byte_length() -> None:
    labels = {"__name__": "DCGM_FI_DEV_GPU_TEMP", "pod": "p" * 300, "Hostname": "h" * 200}
    (decoded,) = write_request_decode(write_request([(labels, [(T0, 1.0)])]))
    assert decoded.labels == labels and decoded.samples == [(T0, 1.0)]


def test_it_keeps_a_lone_framebuffer_part_for_a_total_completed_by_a_later_request() -> None:
    # Prometheus may send free in one request and used in the next: the free part is stored on
    # its own (the merge computes the total when used lands), and no total is guessed from it.
    only_free = series("DCGM_FI_DEV_FB_FREE", [(T0, 1000.0)])
    (host,) = dcgm_map(write_request_decode(write_request([only_free])), names=LabelNames()).hosts
    assert host.samples == [{"time": T0 / 1000, "gpu": "GPU-aaaa", "mem_free_bytes": 1000 * MIB}]
    used_and_reserved = [
        series("DCGM_FI_DEV_FB_USED", [(T0, 5.0)]),
        series("DCGM_FI_DEV_FB_RESERVED", [(T0, 2.0)]),
    ]
    (host,) = dcgm_map(write_request_decode(write_request(used_and_reserved)), names=LabelNames()).hosts
    assert host.samples == [
        {"time": T0 / 1000, "gpu": "GPU-aaaa", "mem_used_bytes": 5 * MIB, "mem_reserved_bytes": 2 * MIB}
    ]


def test_it_stores_profiling_ratios_as_percent_and_the_pcie_and_row_remapping_counters() -> None:
    values = {
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": 0.875,
        "DCGM_FI_PROF_SM_ACTIVE": 0.8125,
        "DCGM_FI_PROF_SM_OCCUPANCY": 0.375,
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.5,
        "DCGM_FI_PROF_DRAM_ACTIVE": 0.25,
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 12.0,
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": 3.0,
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 1.0,
    }
    decoded = write_request_decode(
        write_request(
            [series(name, [(T0, value)]) for name, value in values.items()]
            + [series("DCGM_FI_DEV_XID_ERRORS", [(T0, 79.0)])]
        )
    )
    mapped = dcgm_map(decoded, names=LabelNames())
    (host,) = mapped.hosts
    assert host.samples == [
        {
            "time": T0 / 1000,
            "gpu": "GPU-aaaa",
            "gr_engine_active": 87.5,
            "sm_active": 81.25,
            "sm_occupancy": 37.5,
            "tensor_active": 50.0,
            "dram_active": 25.0,
            "pcie_replay_errors": 12,
            "remapped_rows_correctable": 3,
            "remapped_rows_uncorrectable": 1,
        }
    ]
    assert type(host.samples[0]["pcie_replay_errors"]) is int
    assert host.sources[0]["tensor_active"]["__name__"] == "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
    # The XID series is the last XID code, not a count: not stored, counted as unknown.
    assert mapped.unknown == {"DCGM_FI_DEV_XID_ERRORS": 1} and mapped.samples == len(values)


def test_a_label_set_seen_before_decodes_the_same_through_the_fast_path() -> None:
    # Prometheus 2.x's shape (one sample per series, after the labels) is read by a fast path once
    # the label set is cached: the first request fills the cache, the second takes the fast path.
    # Each case differs from the fast path's tail in one way and must be read field by field.
    label_sets = [
        {"__name__": "DCGM_FI_DEV_POWER_USAGE", **GPU, "pod": f"p-{i}", "namespace": "x" * 140}
        for i in range(4)
    ]
    samples = [
        [(T0, 301.25)],  # the usual: fast path
        [(T0, STALE_NAN)],  # a stale marker: counted, no sample
        [(T0 - 15_000, 1.5), (T0, 2.5)],  # two samples
        [(5, 7.0)],  # a short timestamp varint: not the fast path's 6-byte one
    ]
    body = write_request(list(zip(label_sets, samples, strict=True)))
    for _ in range(2):
        decoded = write_request_decode(body)
        assert [s.labels for s in decoded] == label_sets
        assert [s.samples for s in decoded] == [
            [(T0, 301.25)],
            [],
            [(T0 - 15_000, 1.5), (T0, 2.5)],
            [(5, 7.0)],
        ]
        assert [s.stale for s in decoded] == [0, 1, 0, 0]


def test_a_cached_device_is_read_again_under_other_label_names() -> None:
    body = write_request([series("DCGM_FI_DEV_GPU_UTIL", [(T0, 50.0)], host="other-host")])
    decoded = write_request_decode(body)
    assert dcgm_map(decoded, names=LabelNames()).hosts[0].hostname == "node-1"
    assert (
        dcgm_map(write_request_decode(body), names=LabelNames(hostname="host")).hosts[0].hostname
        == "other-host"
    )


def test_a_gpus_series_share_one_base_of_labels_and_the_cache_holds_a_fleet_in_bounded_memory() -> None:
    # The cache keeps, per series, the key's bytes and a (name, shared base) pair: a GPU's dozen
    # metrics share one dict of their other labels, so that a 2,000-host fleet's 288,000 series
    # fit in a web worker (~500 bytes a series) and a cached device is read once per GPU.
    from accelboard.fleet.remote_write import LabelCache, Labels

    metrics = ["DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED"]
    body = write_request([series(metric, [(T0, 1.0)], pod="p-1") for metric in metrics])
    decoded = write_request_decode(body)
    labels = [s.labels for s in decoded]
    assert all(isinstance(item, Labels) for item in labels)
    assert len({id(item.base) for item in labels}) == 1  # type: ignore[attr-defined]
    assert [dict(item) for item in labels] == [{"__name__": m, **GPU, "pod": "p-1"} for m in metrics]
    assert labels[0]["__name__"] == metrics[0] and labels[0].get("pod") == "p-1"
    assert len(labels[0]) == len(GPU) + 2 and "UUID" in labels[0] and "nope" not in labels[0]
    with pytest.raises(KeyError):
        Labels(None, {"a": "b"})["__name__"]
    assert Labels(None, {"a": "b"}).get("__name__", "") == "" and list(Labels(None, {"a": "b"})) == ["a"]

    # Bounded: emptied when full, and what it hands out stays right.
    cache = LabelCache(size=2)
    for _ in range(2):
        for key, metric in zip(_label_bytes(metrics), metrics, strict=True):
            assert cache.put(key, {"__name__": metric, **GPU})["__name__"] == metric
            assert cache.peek(key) == {"__name__": metric, **GPU}
            assert len(cache) <= 2


def _label_bytes(metrics: list[str]) -> list[bytes]:
    def field(number: int, payload: bytes) -> bytes:
        return bytes([number << 3 | 2, len(payload)]) + payload

    return [
        b"".join(
            field(1, field(1, k.encode()) + field(2, v.encode()))
            for k, v in sorted({"__name__": m, **GPU}.items())
        )
        for m in metrics
    ]


def test_the_label_cache_is_frozen_out_of_the_collector_as_it_grows_and_still_freed_when_emptied(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A full collection walks every object the collector tracks: at the fleet's 288,000 series
    # the cache's entries made each one ~0.4 s. ``label_cache_freeze`` (gunicorn's post_request)
    # freezes them once the cache has grown; frozen, they are still freed when the cache empties.
    import gc

    from accelboard.fleet import remote_write
    from accelboard.fleet.remote_write import LabelCache, label_cache_freeze

    cache = LabelCache(size=3000)
    monkeypatch.setattr(remote_write, "label_cache", cache)
    monkeypatch.setattr(remote_write, "_frozen_at", [0])

    def fill(start: int, count: int) -> None:
        for i in range(start, start + count):
            cache.put(f"key-{i}".encode(), {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": f"h-{i}"})

    gc.unfreeze()
    try:
        fill(0, 999)
        assert label_cache_freeze(growth=1000) is False and gc.get_freeze_count() == 0
        fill(999, 1)
        entry = cache.peek(b"key-0")
        assert label_cache_freeze(growth=1000) is True
        frozen = gc.get_freeze_count()
        assert frozen >= 1000
        assert not any(item is entry for item in gc.get_objects())  # not walked by any collection
        assert label_cache_freeze(growth=1000) is False  # not grown since
        del entry

        fill(1000, 2001)  # full at 3,000: the next entry empties it
        assert len(cache) == 1 and cache.peek(b"key-0") is None
        # The emptied entries were freed by their reference counts, frozen or not: bounded.
        assert gc.get_freeze_count() <= frozen - 1000
        assert cache.peek(b"key-3000") == {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": "h-3000"}
        assert label_cache_freeze(growth=1000) is False
        fill(3001, 999)
        assert label_cache_freeze(growth=1000) is True  # counted again from the emptied cache
    finally:
        gc.unfreeze()
