"""Decoding and mapping in one pass (``remote_write.write_request_map``) against the two passes it
replaces on the request's path (``dcgm_map(write_request_decode(...))``): the same ``Mapped`` (the
same rows, fields and their types, sources, pods, unknown and refused counts, other series) and
the same refusal, on dcgm-exporter-shaped requests and on generated ones."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelboard.fleet import remote_write
from accelboard.fleet.remote_write import (
    DCGM_FIELDS,
    LabelNames,
    Mapped,
    WriteRejected,
    dcgm_map,
    write_request_decode,
    write_request_map,
)
from tests.fleet.prom_wire import STALE_NAN, write_request

T0 = 1_764_454_200_000  # ms
Series = tuple[dict[str, str], list[tuple[int, float]]]


def _two_pass(body: bytes, names: LabelNames) -> tuple[int, Mapped]:
    series = write_request_decode(body)
    return len(series), dcgm_map(series, names=names)


def _outcome(run: Callable[[], tuple[int, Mapped]]) -> Any:
    """What a run gives, comparable: its result written out (each value with its type, dicts in
    their order, NaN equal to NaN), or its refusal."""
    try:
        count, mapped = run()
    except WriteRejected as exc:
        return ("rejected", exc.message, exc.code, exc.status)
    except OverflowError as exc:  # a finite value whose scaled integer is not (~1e308 MiB): as before
        return ("overflow", str(exc))
    return ("mapped", count, repr(mapped))


def _fused_ran(body: bytes, names: LabelNames) -> bool:
    try:
        remote_write._fused_map(body, names)
    except remote_write._Unusual:
        return False
    return True


def _dcgm_page(hosts: int, scrapes: int, *, step_ms: int = 15_000) -> list[Series]:
    """dcgm-exporter's series as Prometheus sends them (labels sorted, one sample a series): whole
    GPUs with and without a pod, an A100's MIG instances, the unknown XID and DRIVER series, and a
    vLLM series (another app's)."""
    out: list[Series] = []
    for s in range(scrapes):
        ms = T0 + s * step_ms
        for h in range(hosts):
            for g in range(4):
                labels = {
                    "DCGM_FI_DRIVER_VERSION": "550.90.07",
                    "Hostname": f"node-{h:03d}",
                    "UUID": f"GPU-{h:03d}-{g}",
                    "device": f"nvidia{g}",
                    "gpu": str(g),
                    "instance": f"10.0.{h}.1:9400",
                    "job": "dcgm-exporter",
                    "modelName": "NVIDIA A100-SXM4-80GB" if g == 3 else "NVIDIA H100 80GB HBM3",
                }
                if g % 2 == 0:
                    labels |= {"container": "main", "namespace": "ml", "pod": f"train-{h}"}
                if g == 3:
                    labels |= {"GPU_I_ID": str(1 + s % 2), "GPU_I_PROFILE": "3g.40gb"}
                for k, (metric, (name, _)) in enumerate(sorted(DCGM_FIELDS.items())):
                    value = float(1_000 + h + g + s) if "mem" in name or "energy" in name else 0.25 * (k + s)
                    out.append(({"__name__": metric, **dict(sorted(labels.items()))}, [(ms, value)]))
                out.append(({"__name__": "DCGM_FI_DEV_XID_ERRORS", **labels}, [(ms, 0.0)]))
            out.append(({"__name__": "vllm:prompt_tokens_total", "model_name": "llama"}, [(ms, 10.0 * s)]))
    return out


def test_it_maps_a_dcgm_exporter_request_as_the_two_passes_do() -> None:
    names = LabelNames()
    body = write_request(_dcgm_page(hosts=3, scrapes=2))
    first = _outcome(lambda: write_request_map(body, names=names))  # series new: the two passes
    assert _fused_ran(body, names)  # now cached: one pass
    again = _outcome(lambda: write_request_map(body, names=names))
    expected = _outcome(lambda: _two_pass(body, names))
    assert first == again == expected
    count, mapped = _two_pass(body, names)
    assert expected[0] == "mapped" and mapped.samples > 0 and mapped.others and mapped.unknown


def test_it_keeps_the_last_of_two_series_giving_one_field_and_counts_stale_and_refused_ones() -> None:
    names = LabelNames()
    gpu = {"Hostname": "node-1", "UUID": "GPU-a", "gpu": "0"}
    series: list[Series] = [
        ({"__name__": "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", **gpu}, [(T0, 4.0)]),
        ({"__name__": "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", **gpu}, [(T0, 8.0)]),  # the same field
        ({"__name__": "DCGM_FI_DEV_POWER_USAGE", **gpu}, [(T0, STALE_NAN)]),
        ({"__name__": "DCGM_FI_DEV_GPU_UTIL", **gpu, "Hostname": "bad\x07host"}, [(T0, 5.0)]),
        ({"__name__": "vllm:num_requests_running", "model_name": "m"}, [(T0, STALE_NAN)]),
        ({"__name__": "vllm:num_requests_running", "model_name": "n"}, [(T0, math.nan)]),
        ({"__name__": "vllm:num_requests_waiting", "model_name": "m"}, [(T0, STALE_NAN)]),
        # The same GPU and instant under other labels (a second pod on it): the same row.
        ({"__name__": "DCGM_FI_DEV_GPU_TEMP", **gpu, "pod": "serve-1"}, [(T0, 41.0)]),
    ]
    body = write_request(series)
    _two_pass(body, names)
    assert _fused_ran(body, names)
    fused, expected = (
        _outcome(lambda: write_request_map(body, names=names)),
        _outcome(lambda: _two_pass(body, names)),
    )
    assert fused == expected
    assert expected[0] == "mapped"
    _, mapped = _two_pass(body, names)
    assert mapped.hosts[0].samples == [
        {"time": T0 / 1000, "gpu": "GPU-a", "throttle_reasons": 8, "temperature_c": 41.0}
    ]
    assert list(mapped.unknown.items()) == [
        ("vllm:num_requests_running", 1),
        ("vllm:num_requests_waiting", 0),
    ]
    assert sum(mapped.refused.values()) == 1


@pytest.mark.parametrize(
    "bad",
    [
        ({"__name__": "DCGM_FI_DEV_POWER_USAGE", "Hostname": "node-1", "UUID": "GPU-a"}, [(T0, math.inf)]),
        ({"__name__": "DCGM_FI_DEV_POWER_USAGE", "Hostname": "node-1", "UUID": "GPU-a"}, [(T0, math.nan)]),
        ({"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": "node-1"}, [(T0, 1.0)]),  # no GPU
        ({"__name__": "DCGM_FI_DEV_GPU_UTIL", "UUID": "GPU-b"}, [(T0, 1.0)]),  # no host
        (
            {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": "node-1", "UUID": "G", "pod": "p\x07"},
            [(T0, 1.0)],
        ),
    ],
)
def test_it_refuses_the_first_bad_series_as_the_two_passes_do(bad: Series) -> None:
    names = LabelNames()
    good = ({"__name__": "DCGM_FI_DEV_GPU_TEMP", "Hostname": "node-1", "UUID": "GPU-a"}, [(T0, 40.0)])
    body = write_request([good, bad, good])
    # The label sets cached first (a request of the same series with good values), so that the
    # one pass meets the bad value itself.
    write_request_decode(write_request([good, (bad[0], [(T0, 1.0)])]))
    expected = _outcome(lambda: _two_pass(body, names))
    assert expected[0] == "rejected"
    assert _outcome(lambda: write_request_map(body, names=names)) == expected
    # A body cut short after the bad series: the decoding's refusal comes first, as before.
    cut = body[:-3]
    assert _outcome(lambda: write_request_map(cut, names=names)) == _outcome(lambda: _two_pass(cut, names))


_metric = st.sampled_from([*sorted(DCGM_FIELDS), "DCGM_FI_DEV_XID_ERRORS", "vllm:generation_tokens_total"])
_value = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.sampled_from([0.0, -1.0, 1e18, 81_559.0, math.inf, STALE_NAN, math.nan]),
)
_stamp = st.one_of(
    st.sampled_from([T0, T0 + 15_000]),  # instants shared by series, as a scrape's are
    st.integers(min_value=T0 - 10**6, max_value=T0 + 10**6),
    st.integers(-(2**63), 2**63 - 1),
)
_labels = st.fixed_dictionaries(
    {"Hostname": st.sampled_from(["node-1", "node-2", "", "bad\x01name"])},
    optional={
        "UUID": st.sampled_from(["GPU-a", "GPU-b", "x" * 100]),
        "gpu": st.sampled_from(["0", "1", "40000", "x"]),
        "modelName": st.sampled_from(["NVIDIA H100 80GB HBM3", "NVIDIA A30"]),
        "GPU_I_ID": st.sampled_from(["1", "2"]),
        "GPU_I_PROFILE": st.sampled_from(["1g.10gb", "3g.40gb", "weird"]),
        "pod": st.sampled_from(["train-0", "serve-1", "p" * 300]),
        "namespace": st.sampled_from(["ml", "prod"]),
        "container": st.sampled_from(["main", "side"]),
        "exported_Hostname": st.sampled_from(["node-3", "node-1"]),
    },
)
_series = st.tuples(
    st.tuples(_metric, _labels).map(lambda pair: {"__name__": pair[0], **pair[1]}),
    st.lists(st.tuples(_stamp, _value), min_size=1, max_size=2),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_series, min_size=1, max_size=12), st.booleans())
def test_it_maps_generated_requests_as_the_two_passes_do(series: list[Series], cached: bool) -> None:
    names = LabelNames()
    body = write_request(series)
    if cached:  # the label sets seen before, as on a running fleet: the one pass where it can
        write_request_decode(write_request([(labels, [(T0, 1.0)]) for labels, _ in series]))
    expected = _outcome(lambda: _two_pass(body, names))
    assert _outcome(lambda: write_request_map(body, names=names)) == expected
