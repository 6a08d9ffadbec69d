"""Property tests of the telemetry parser (``fleet.ingest_validation.telemetry_batch_parse``), pure:
whatever JSON comes in, the answer is a batch or an ``IngestRejected`` naming a path, never
another exception; valid batches come out column for column; one bad value is named exactly."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelboard.fleet.ingest_validation import (
    MAX_JSON_DEPTH,
    SAMPLE_FIELDS,
    IngestRejected,
    TelemetryBatch,
    telemetry_batch_parse,
)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=25,
)  # fmt: skip
GPUS = ["GPU-a", "GPU-b", "MIG-GPU-c/1/0"]
_HOSTNAME_CHARS = st.characters(exclude_categories=["Cc", "Cf", "Cs", "Zl", "Zp"])


def _value(name: str) -> st.SearchStrategy[Any]:
    integer, lowest, highest = SAMPLE_FIELDS[name]
    if integer:
        return st.none() | st.integers(min_value=int(lowest), max_value=int(highest))
    return st.none() | st.floats(min_value=lowest, max_value=highest, allow_nan=False)


@st.composite
def times(draw: Any) -> Any:
    """Epoch seconds, or RFC 3339 with any real offset (-14:00..+14:00), within the allowed span."""
    moment = draw(st.datetimes(min_value=datetime(2000, 1, 2), max_value=datetime(2026, 11, 30)))
    if draw(st.booleans()):
        return moment.replace(tzinfo=UTC).timestamp()
    minutes = draw(st.integers(min_value=-14 * 60, max_value=14 * 60))
    return moment.replace(tzinfo=timezone(timedelta(minutes=minutes))).isoformat()


@st.composite
def batches(draw: Any) -> dict[str, Any]:
    samples = draw(
        st.lists(
            st.fixed_dictionaries(
                {"time": times(), "gpu": st.sampled_from(GPUS)},
                optional={name: _value(name) for name in SAMPLE_FIELDS},
            ),
            max_size=12,
        )
    )
    facts = draw(st.dictionaries(st.text(min_size=1, max_size=8).filter(lambda k: k not in {"region", "instance_type",
                 "provider", "simulated", "hostname", "agent_version", "driver_version", "cuda_version"}),
                 JSON, max_size=4))  # fmt: skip
    return {
        "batch_id": draw(st.text(min_size=1, max_size=20)),
        # Host names hold no control or format characters (importers.hostnames).
        "host": {"hostname": draw(st.text(_HOSTNAME_CHARS, min_size=1, max_size=30)), "facts": facts},
        "accelerators": [{"uuid": gpu, "index": i} for i, gpu in enumerate(GPUS)],
        "samples": samples,
    }


def _parse(payload: Any) -> TelemetryBatch | IngestRejected:
    try:
        return telemetry_batch_parse(payload, now=NOW)
    except IngestRejected as exc:
        return exc


@settings(max_examples=300, deadline=None)
@given(payload=JSON | batches().flatmap(lambda b: st.just(b)))
def test_any_json_is_a_batch_or_a_rejection_naming_a_path(payload: Any) -> None:
    result = _parse(payload)
    if isinstance(result, IngestRejected):
        assert result.status in (413, 422) and result.message
        assert result.code


@settings(max_examples=150, deadline=None)
@given(payload=batches())
def test_a_valid_batch_comes_out_column_for_column(payload: dict[str, Any]) -> None:
    batch = telemetry_batch_parse(payload, now=NOW)
    samples = payload["samples"]
    assert batch.gpus == [s["gpu"] for s in samples]
    for sample, epoch in zip(samples, batch.epochs, strict=True):
        stamp = sample["time"]
        expected = stamp if isinstance(stamp, float) else datetime.fromisoformat(stamp).timestamp()
        assert math.isclose(epoch, expected, abs_tol=1e-6)
    for name in SAMPLE_FIELDS:
        assert batch.columns[name] == [s.get(name) for s in samples]


BAD = {
    "power_w": -1.0, "gpu_util": 100.5, "temperature_c": -300.0, "energy_mj": -1, "xid_errors": 2**31,
    "mem_used_bytes": 1.5, "sm_clock_mhz": "fast", "time": "2026-01-01T00:00:00+15:00",
}  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(payload=batches().filter(lambda b: b["samples"]), data=st.data())
def test_one_bad_value_is_named_by_its_sample_and_field(payload: dict[str, Any], data: Any) -> None:
    index = data.draw(st.integers(min_value=0, max_value=len(payload["samples"]) - 1))
    name = data.draw(st.sampled_from(sorted(BAD)))
    payload["samples"][index][name] = BAD[name]
    with pytest.raises(IngestRejected) as raised:
        telemetry_batch_parse(payload, now=NOW)
    assert raised.value.path == f"samples[{index}].{name}"


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 1000])
def test_facts_nested_too_deep_are_rejected_without_recursing(depth: int) -> None:
    facts: dict[str, Any] = {}
    for _ in range(depth):
        facts = {"a": facts}
    result = _parse({"batch_id": "b", "host": {"hostname": "h", "facts": facts}})
    assert isinstance(result, IngestRejected) and (result.path, result.code) == ("host.facts", "too_deep")


@st.composite
def uniform_batches(draw: Any) -> dict[str, Any]:
    """Batches whose samples all carry the same fields (an agent's: the columns' fast path),
    values None or not."""
    payload = draw(batches().filter(lambda b: b["samples"]))
    names = draw(st.lists(st.sampled_from(sorted(SAMPLE_FIELDS)), unique=True, max_size=len(SAMPLE_FIELDS)))
    payload["samples"] = [
        {"time": sample["time"], "gpu": sample["gpu"], **{name: draw(_value(name)) for name in names}}
        for sample in payload["samples"]
    ]
    return payload


@settings(max_examples=150, deadline=None)
@given(payload=uniform_batches())
def test_a_uniform_batch_comes_out_as_sample_by_sample(payload: dict[str, Any]) -> None:
    # The columns taken in one pass (every sample carries the same keys) are those read sample by
    # sample, as the parser read every batch before; and so are a batch's whose samples differ.
    batch = telemetry_batch_parse(payload, now=NOW)
    samples = payload["samples"]
    assert batch.gpus == [s["gpu"] for s in samples]
    for name in SAMPLE_FIELDS:
        assert batch.columns[name] == [s.get(name) for s in samples]
    ragged = [dict(sample) for sample in samples]
    carried = [name for name in SAMPLE_FIELDS if name in ragged[0]]
    if carried:  # the first sample without a field the others carry
        del ragged[0][carried[0]]
    else:  # or with one they do not
        ragged[0]["ecc_errors"] = None
    other = telemetry_batch_parse({**payload, "samples": ragged}, now=NOW)
    assert (other.gpus, other.epochs) == (batch.gpus, batch.epochs)
    for name in SAMPLE_FIELDS:
        assert other.columns[name] == [s.get(name) for s in ragged]


@settings(max_examples=150, deadline=None)
@given(payload=uniform_batches(), data=st.data())
def test_one_bad_value_of_a_uniform_batch_is_named_by_its_sample_and_field(
    payload: dict[str, Any], data: Any
) -> None:
    index = data.draw(st.integers(min_value=0, max_value=len(payload["samples"]) - 1))
    name = data.draw(st.sampled_from(sorted(set(BAD) & set(payload["samples"][0]))))
    payload["samples"][index][name] = BAD[name]
    with pytest.raises(IngestRejected) as raised:
        telemetry_batch_parse(payload, now=NOW)
    assert raised.value.path == f"samples[{index}].{name}"


@pytest.mark.parametrize(
    ("samples", "path", "code"),
    [
        ([{"time": 1.7e9, "gpu": "GPU-a", "power_w": 1.0}, {"time": 1.7e9, "gpu": "GPU-b", "watts": 1.0}],
         "samples[1].watts", "unknown_field"),
        ([{"time": 1.7e9, "power_w": 1.0}, {"time": 1.7e9, "power_w": 2.0}], "samples[0].gpu", "type"),
        ([{"gpu": "GPU-a", "power_w": 1.0}, {"gpu": "GPU-b", "power_w": 2.0}], "samples[0].time", "missing"),
        ([{"time": 1.7e9, "gpu": "GPU-a", "power_w": 1.0}, {"time": 1.7e9, "gpu": "GPU-b", "power_w": True}],
         "samples[1].power_w", "type"),
        ([{"time": 1.7e9, "gpu": "GPU-a"}, ["time", "gpu"]], "samples[1]", "type"),
        ([{"time": 1.7e9, "gpu": "GPU-a", "watts": 1.0}, {"time": 1.7e9, "gpu": "GPU-b", "watts": 1.0}],
         "samples[0].watts", "unknown_field"),
    ],
)  # fmt: skip
def test_samples_with_the_same_keys_or_not_are_refused_at_the_first_bad_field(
    samples: list[Any], path: str, code: str
) -> None:
    payload = {"batch_id": "b", "host": {"hostname": "h"}, "samples": samples}
    with pytest.raises(IngestRejected) as raised:
        telemetry_batch_parse(payload, now=NOW)
    assert (raised.value.path, raised.value.code) == (path, code)


def test_samples_as_long_as_each_other_with_other_fields_come_out_sample_by_sample() -> None:
    samples = [
        {"time": 1.7e9, "gpu": "GPU-a", "power_w": 1.0},
        {"gpu": "GPU-b", "time": 1.7e9 + 1, "gpu_util": 2.0},  # as many keys, one of them another
        {"gpu_util": 3.0, "time": 1.7e9 + 2, "gpu": "GPU-a"},  # the same keys in another order
    ]
    batch = telemetry_batch_parse({"batch_id": "b", "host": {"hostname": "h"}, "samples": samples}, now=NOW)
    assert (batch.gpus, batch.epochs) == (["GPU-a", "GPU-b", "GPU-a"], [1.7e9, 1.7e9 + 1, 1.7e9 + 2])
    assert batch.columns["power_w"] == [1.0, None, None]
    assert batch.columns["gpu_util"] == [None, 2.0, 3.0]
    assert batch.columns["energy_mj"] == [None, None, None]
