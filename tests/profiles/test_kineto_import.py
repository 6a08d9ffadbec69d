"""The Kineto importer: streaming reader, the shapes traces come in, and bad input."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import numpy as np
import pytest

from accelboard.importers import jsonstream, kineto
from accelboard.importers.base import ParseError, UnrecognisedFormat
from accelboard.importers.profile_registry import profile_detect, profile_parse
from accelboard.testing.traces import kineto_document, kineto_event, write_document, write_training_trace


def _small_events() -> list[dict]:
    return [
        kineto_event("ProfilerStep#3", "user_annotation", -10.0, 150.0, pid=99, tid=1),
        kineto_event("aten::mm", "cpu_op", -8.0, 6.0, pid=99),
        kineto_event("cudaLaunchKernel", "cuda_runtime", -5.0, 3.0, correlation=11, pid=99),
        kineto_event("ampere_sgemm_128x64_tn", "kernel", 0.0, 100.0, correlation=11),
        kineto_event("naïve µkernel", "kernel", 120.0, 2.5, stream=8, correlation=12),
        kineto_event("Memcpy HtoD (Pinned -> Device)", "gpu_memcpy", 130.0, 10.0, correlation=13),
        kineto_event("## forward ##", "gpu_user_annotation", 0.0, 140.0),
        {"ph": "f", "id": 11, "pid": 0, "tid": 7, "ts": 0.0, "cat": "ac2g", "name": "ac2g"},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
    ]


def test_it_reads_gpu_activities_steps_ops_and_launch_times(tmp_path: Path) -> None:
    path = write_document(tmp_path / "rank3.json", kineto_document(_small_events(), rank=3, world_size=4))
    data = profile_parse([(path.name, path)])
    (trace,) = data.ranks
    assert data.source_format == "kineto" and trace.rank == 3 and trace.world_size == 4
    assert trace.device == "NVIDIA H100 80GB HBM3"
    assert len(trace.events) == 3  # the GPU annotation is not GPU work
    assert [trace.names[i] for i in trace.events.name] == [
        "ampere_sgemm_128x64_tn",
        "naïve µkernel",
        "Memcpy HtoD (Pinned -> Device)",
    ]
    assert trace.events.stream.tolist() == [7, 8, 7]
    assert trace.events.launch[0] == -5.0 and np.isnan(trace.events.launch[1:]).all()
    assert [(s.number, s.start, s.end) for s in trace.steps] == [(3, -10.0, 140.0)]
    assert trace.ops == {"aten::mm": [1, 6.0]}
    assert trace.runtime == {"cudaLaunchKernel": [1, 3.0]}


@pytest.mark.parametrize("chunk", [3, 7, 64, 1 << 20])
def test_it_reads_the_same_across_chunk_boundaries_gzip_and_bare_arrays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    monkeypatch.setattr(jsonstream, "CHUNK_CHARS", chunk)
    document = kineto_document(_small_events(), rank=1)
    plain = write_document(tmp_path / "a.json", document)
    zipped = write_document(tmp_path / "b.json.gz", document)
    # Header keys after the events, and the Chrome "JSON array format".
    after = tmp_path / "c.json"
    after.write_text(
        '{"traceEvents": ' + json.dumps(document["traceEvents"]) + ', "distributedInfo": {"rank": 1}}'
    )
    bare = tmp_path / "d.json"
    bare.write_text(json.dumps(document["traceEvents"]))
    results = []
    for path in (plain, zipped, after, bare):
        trace = profile_parse([(path.name, path)]).ranks[0]
        results.append(
            (trace.names, trace.events.start.tolist(), trace.events.dur.tolist(), len(trace.steps))
        )
    assert all(result == results[0] for result in results)
    assert profile_parse([("a", after)]).ranks[0].rank == 1


def test_it_streams_from_a_binary_file_object_and_bytes(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    write_training_trace(buffer, steps=2, layers=2)
    data = buffer.getvalue()
    from_bytes = profile_parse([("t.json", data)]).ranks[0]
    buffer.seek(0)
    from_stream = profile_parse([("t.json", buffer)]).ranks[0]
    assert len(from_bytes.events) == len(from_stream.events) > 0
    assert from_bytes.events.start.tolist() == from_stream.events.start.tolist()


def test_it_detects_traces_and_not_other_json(tmp_path: Path) -> None:
    trace = write_document(tmp_path / "x.json.gz", kineto_document(_small_events()))
    other = tmp_path / "bench.json"
    other.write_text(json.dumps({"results": [{"ph": 1}], "ts": 3}))
    assert profile_detect(trace) == "kineto"
    assert profile_detect(other) is None
    with pytest.raises(UnrecognisedFormat, match="bench.json"):
        profile_parse([("bench.json", other)])


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2}, {"ph": "X"',
            "truncated",
        ),
        (b'{"traceEvents": [{"ph": "X", "cat": "kernel" "name": "k"}]}', "invalid JSON"),
        (b'{"traceEvents": [{"ph": "X"}]} trailing', "after the end"),
        (b"\xff\xfe{not utf8", "not UTF-8"),
    ],
)
def test_it_refuses_broken_traces_naming_the_file(content: bytes, message: str) -> None:
    with pytest.raises(ParseError, match=message) as caught:
        kineto.parse([("broken.json", content)])
    assert "broken.json" in str(caught.value)


def test_it_refuses_a_truncated_gzip_and_a_duplicated_rank(tmp_path: Path) -> None:
    data = gzip.compress(json.dumps(kineto_document(_small_events())).encode())
    with pytest.raises(ParseError, match="cut.json.gz"):
        kineto.parse([("cut.json.gz", data[: len(data) // 2])])
    path = write_document(tmp_path / "r.json", kineto_document(_small_events(), rank=0))
    with pytest.raises(ParseError, match="rank 0 twice"):
        kineto.parse([("a.json", path), ("b.json", path)])


def test_a_negative_duration_is_refused_naming_the_event() -> None:
    """Counted as 0 once, it made a broken trace look like a profile (tests/profiles/test_hostile_traces.py)."""
    events = [kineto_event("k", "kernel", 5.0, -3.0), kineto_event("k", "kernel", 10.0, 2.0)]
    with pytest.raises(ParseError, match=r"neg.json: traceEvents\[0\].dur: -3.0 is not a duration"):
        kineto.parse([("neg.json", json.dumps(kineto_document(events)).encode())])


def test_the_fast_path_falls_back_where_orjson_refuses_and_keeps_tricky_names(tmp_path: Path) -> None:
    """NaN and integers beyond 64 bits are JSON the standard library reads and orjson refuses;
    names holding "}, {" must not be taken for event boundaries."""
    events = _small_events()
    events.insert(4, kineto_event('tricky}, {"name', "kernel", 200.0, 1.0))
    text = json.dumps(kineto_document(events), indent=1)
    plain = profile_parse([("a.json", text.encode())]).ranks[0]
    odd = text.replace('"dur": 6.0', '"dur": 6.0, "extra": NaN, "big": 1180591620717411303424')
    assert odd != text
    fallback = profile_parse([("b.json", odd.encode())]).ranks[0]
    assert plain.names == fallback.names and 'tricky}, {"name' in plain.names
    assert plain.events.start.tolist() == fallback.events.start.tolist()
    assert plain.ops == fallback.ops == {"aten::mm": [1, 6.0]}


def test_ids_beyond_64_bits_do_not_break_the_import() -> None:
    events = [
        kineto_event("cudaLaunchKernel", "cuda_runtime", 0.0, 1.0, correlation=1 << 70),
        kineto_event("k", "kernel", 5.0, 2.0, stream=1 << 70, correlation=1 << 70),
    ]
    trace = kineto.parse([("big.json", json.dumps(kineto_document(events)).encode())]).ranks[0]
    assert trace.events.dur.tolist() == [2.0] and trace.events.stream.tolist() == [-1]
