"""Remote-write's batches validated once a request (``remote_write_services.host_batches_prepare``)
against the telemetry path's own validation of the same payloads (``telemetry_batch_parse``)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest

from accelboard.fleet.attribution_validation import telemetry_batch_attribution_parse
from accelboard.fleet.ingest_validation import MAX_ACCELERATORS, MAX_SAMPLES, IngestRejected
from accelboard.fleet.remote_write import LabelNames, dcgm_map, write_request_decode
from accelboard.fleet.remote_write_pods import pod_intervals
from accelboard.fleet.remote_write_services import host_batches_prepare, host_payloads
from tests.fleet.prom_wire import write_request

NOW_MS = int(time.time() * 1000) - 60_000
POD = {"pod": "train-0", "namespace": "ml", "container": "main"}


def _gpu(host: int, gpu: int, **labels: str) -> dict[str, str]:
    return {
        "Hostname": f"node-{host}",
        "UUID": f"GPU-{host}-{gpu}",
        "gpu": str(gpu),
        "modelName": "NVIDIA H100 80GB HBM3",
        **labels,
    }


def _payloads(series: list[tuple[dict[str, str], list[tuple[int, float]]]]) -> list[dict[str, Any]]:
    """The request's host payloads as ``prometheus_write_ingest`` builds them (pods included)."""
    mapped = dcgm_map(write_request_decode(write_request(series)), names=LabelNames())
    batches = sorted(mapped.hosts, key=lambda host: host.hostname)
    until_ms = int(time.time() * 1000) + 299_000
    pods = {
        batch.hostname: [
            item
            for interval in pod_intervals(batch.holders, scrape_ms=15_000, until_ms=until_ms)
            for item in interval.attribution()
        ]
        for batch in batches
    }
    return host_payloads(
        batches, digest="ab" * 16, pods={name: items for name, items in pods.items() if items}
    )


def _fleet(hosts: int = 3, scrapes: int = 2) -> list[tuple[dict[str, str], list[tuple[int, float]]]]:
    out: list[tuple[dict[str, str], list[tuple[int, float]]]] = []
    for h in range(hosts):
        for g in range(4):
            labels = _gpu(h, g, **(POD if g % 2 else {}))
            if g == 3:  # a MIG instance
                labels |= {"GPU_I_ID": "2", "GPU_I_PROFILE": "1g.10gb"}
            for s in range(scrapes):
                ms = NOW_MS - s * 15_000
                values = {
                    "DCGM_FI_DEV_POWER_USAGE": 300.5 + h + g,
                    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 5e9 + s * 1e6,
                    "DCGM_FI_DEV_GPU_UTIL": 97.0,
                    "DCGM_FI_DEV_FB_USED": 1000.0 + g,
                    "DCGM_FI_DEV_FB_FREE": 80000.0,
                    "DCGM_FI_DEV_GPU_TEMP": -5.0 if h == 2 else 61.0,
                    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": 4.0,
                    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.25,
                }
                if h == 1:  # a host that sends power alone: its other columns all None
                    values = {"DCGM_FI_DEV_POWER_USAGE": values["DCGM_FI_DEV_POWER_USAGE"]}
                out += [({"__name__": name, **labels}, [(ms, value)]) for name, value in values.items()]
    return out


def test_it_builds_the_batches_the_telemetry_validation_builds() -> None:
    now = datetime.now(UTC)
    payloads = _payloads(_fleet())
    assert len(payloads) == 3 and any("attribution" in payload for payload in payloads)
    prepared = host_batches_prepare(payloads, now=now)
    assert prepared is not None and len(prepared) == len(payloads)
    for entry, payload in zip(prepared, payloads, strict=True):
        batch, attribution = telemetry_batch_attribution_parse(payload, now=now)
        assert entry.batch == batch
        assert entry.batch.columns == batch.columns and entry.batch.samples is payload["samples"]
        assert entry.attribution == attribution
        assert entry.digest == ""  # keyed by the body: no digest kept with the claim


def test_a_hosts_head_validated_before_is_kept_and_handed_out_as_a_copy() -> None:
    # The hosts and GPUs of a request's payloads come again in the next (``_head_parse`` keeps
    # them): the second request's batches still equal the validation's, and a caller changing one
    # batch's GPUs changes no later batch.
    now = datetime.now(UTC)
    payloads = _payloads(_fleet())
    first = host_batches_prepare(payloads, now=now)
    assert first is not None
    first[0].batch.accelerators[0]["name"] = "changed"
    first[0].batch.host_facts["changed"] = True
    again = host_batches_prepare(_payloads(_fleet()), now=now)
    assert again is not None
    for entry, payload in zip(again, payloads, strict=True):
        batch, _ = telemetry_batch_attribution_parse(payload, now=now)
        assert entry.batch == batch
        assert entry.batch.accelerators == batch.accelerators and entry.batch.host_facts == batch.host_facts


def test_a_refused_head_is_refused_again() -> None:
    now = datetime.now(UTC)
    series = [({"__name__": "DCGM_FI_DEV_POWER_USAGE", **_gpu(7, 0, modelName="H" * 121)}, [(NOW_MS, 1.0)])]
    for _ in range(2):
        assert host_batches_prepare(_payloads(series), now=now) is None


def _refused_by_parse(payloads: list[dict[str, Any]], now: datetime) -> IngestRejected:
    for payload in payloads:
        try:
            telemetry_batch_attribution_parse(payload, now=now)
        except IngestRejected as exc:
            return exc
    raise AssertionError("the telemetry validation accepted every payload")


@pytest.mark.parametrize(
    "bad",
    [
        "temperature",
        "power",
        "future",
        "model_name",
        "attribution",
    ],
)
def test_what_the_telemetry_validation_refuses_it_leaves_to_it(bad: str) -> None:
    now = datetime.now(UTC)
    series = _fleet()
    if bad == "temperature":
        series.append(({"__name__": "DCGM_FI_DEV_GPU_TEMP", **_gpu(0, 0)}, [(NOW_MS, 2_000.0)]))
    elif bad == "power":
        series.append(({"__name__": "DCGM_FI_DEV_POWER_USAGE", **_gpu(2, 1)}, [(NOW_MS, -1.0)]))
    elif bad == "future":
        series.append(({"__name__": "DCGM_FI_DEV_POWER_USAGE", **_gpu(1, 0)}, [(NOW_MS + 3_600_000, 1.0)]))
    elif bad == "model_name":
        series.append(
            ({"__name__": "DCGM_FI_DEV_POWER_USAGE", **_gpu(7, 0, modelName="H" * 121)}, [(NOW_MS, 1.0)])
        )
    payloads = _payloads(series)
    if bad == "attribution":
        payloads[1]["attribution"] = [{"gpu": "GPU-1-0", "start": "yesterday"}]
    assert host_batches_prepare(payloads, now=now) is None
    _refused_by_parse(payloads, now)


def test_a_host_over_the_batch_limits_is_left_to_the_telemetry_validation() -> None:
    now = datetime.now(UTC)
    many_instants = [
        ({"__name__": "DCGM_FI_DEV_POWER_USAGE", **_gpu(0, 0)}, [(NOW_MS - i, 1.0)])
        for i in range(MAX_SAMPLES + 1)
    ]
    payloads = _payloads(many_instants)
    assert host_batches_prepare(payloads, now=now) is None
    assert _refused_by_parse(payloads, now).path == "samples"
    many_gpus = [
        ({"__name__": "DCGM_FI_DEV_POWER_USAGE", **_gpu(0, g)}, [(NOW_MS, 1.0)])
        for g in range(MAX_ACCELERATORS + 1)
    ]
    payloads = _payloads(many_gpus)
    assert host_batches_prepare(payloads, now=now) is None
    assert _refused_by_parse(payloads, now).path == "accelerators"
