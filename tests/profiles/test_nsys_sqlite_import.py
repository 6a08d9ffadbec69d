"""Nsight Systems SQLite exports (``nsys export --type sqlite``): a timeline read like Kineto's.

The fixture (``accelboard.testing.nsys_export``) has the tables and columns of a real export
(nsys 2026.1, schema 3.24); its figures are worked out by hand in ``write_export``'s docstring.
"""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from accelboard.benchmarks.models import BenchmarkRun
from accelboard.cli import main as accelboard_main
from accelboard.importers.base import ParseError, UnrecognisedFormat
from accelboard.importers.profile_registry import profile_detect, profile_parse
from accelboard.importers.registry import detect
from accelboard.profiles.analysis import profile_analyse
from accelboard.profiles.models import Profile
from accelboard.testing.nsys_export import ADD, GEMM, GPU, NCCL, write_export
from tests.factories import H100, accelerator_type_from

FIXTURES = Path(__file__).resolve().parents[1] / "importers" / "fixtures"


@pytest.fixture
def export(tmp_path: Path) -> Path:
    return write_export(tmp_path / "report.sqlite")


def test_it_is_detected_and_the_breakdown_matches_the_hand_count(export: Path) -> None:
    assert profile_detect(str(export)) == "nsys-sqlite"
    assert profile_detect(export.read_bytes()) == "nsys-sqlite"
    data = profile_parse([("report.sqlite", str(export))])
    assert data.source_format == "nsys-sqlite" and data.warnings == []
    summary = profile_analyse(data)
    (rank,) = summary["ranks"]
    assert summary["timeline"] is True and summary["devices"] == [GPU]
    assert rank["span_us"] == pytest.approx(420.0)
    assert rank["busy_us"] == pytest.approx(235.0)
    c = rank["categories"]
    assert c["gemm"] == pytest.approx(100.0) and c["elementwise"] == pytest.approx(20.0)
    assert c["communication"] == pytest.approx(100.0) and rank["overlap_us"] == pytest.approx(50.0)
    assert c["memcpy_htod"] == pytest.approx(10.0) and c["memset"] == pytest.approx(5.0)
    assert c["idle"] == pytest.approx(185.0)
    assert rank["idle_host_us"] == pytest.approx(100.0) and rank["idle_other_us"] == pytest.approx(85.0)
    assert rank["idle_unknown_us"] == pytest.approx(0.0)
    assert sum(c.values()) == pytest.approx(rank["span_us"])
    assert rank["kernels"] == 3 and rank["kernel_us"] == pytest.approx(270.0)
    assert rank["streams"] == 2
    assert rank["launch_calls"] == 3 and rank["launch_us_mean"] == pytest.approx(4.0)
    kernels = {row["name"]: row for row in summary["kernels"]}
    assert kernels[GEMM]["category"] == "gemm" and kernels[GEMM]["precision"] == "bf16"
    assert kernels["[CUDA memcpy Host-to-Device]"]["kind"] == "memcpy"
    assert kernels["[CUDA memset]"]["kind"] == "memset"
    ops = {row["name"]: row for row in summary["ops"]}
    assert ops["forward"]["total_us"] == pytest.approx(115.0) and "a mark" not in ops
    (step,) = rank["steps"]
    assert step["step"] == 1 and step["activities"] == 5


def _kineto_twin() -> bytes:
    """The fixture's activities as a PyTorch profiler trace (µs), for the comparison below."""
    events: list[dict[str, Any]] = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 980, "dur": 310},
        {"ph": "X", "cat": "user_annotation", "name": "forward", "ts": 985, "dur": 115},
    ]
    gpu = [
        ("kernel", GEMM, 1000, 100, 7, 10),
        ("kernel", NCCL, 1050, 150, 20, 11),
        ("gpu_memcpy", "[CUDA memcpy Host-to-Device]", 1300, 10, 7, 12),
        ("gpu_memset", "[CUDA memset]", 1310, 5, 7, 13),
        ("kernel", ADD, 1400, 20, 7, 14),
    ]
    for cat, name, ts, dur, stream, corr in gpu:
        args = {"device": 0, "stream": stream, "correlation": corr}
        events.append({"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "args": args})
    for name, ts, dur, corr in [
        ("cudaLaunchKernel", 990, 5, 10),
        ("cudaLaunchKernel", 996, 3, 11),
        ("cudaMemsetAsync", 1100.5, 0.5, 13),
        ("cudaMemcpyAsync", 1250, 2, 12),
        ("cudaLaunchKernel", 1280, 4, 14),
        ("cudaStreamSynchronize", 1284, 136.5, 15),
    ]:
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": name,
                "ts": ts,
                "dur": dur,
                "args": {"correlation": corr},
            }
        )
    return json.dumps({"deviceProperties": [{"id": 0, "name": GPU}], "traceEvents": events}).encode()


def test_it_gives_the_figures_a_kineto_trace_of_the_same_activities_gives(export: Path) -> None:
    ours = profile_analyse(profile_parse([("report.sqlite", str(export))]))
    theirs = profile_analyse(profile_parse([("trace.json", _kineto_twin())]))
    for key in ("span_us", "busy_us", "overlap_us", "idle_host_us", "idle_other_us", "kernel_us"):
        assert ours["totals"][key] == pytest.approx(theirs["totals"][key]), key
    for key, value in theirs["totals"]["categories"].items():
        assert ours["totals"]["categories"][key] == pytest.approx(value), key
    assert ours["totals"]["kernels"] == theirs["totals"]["kernels"] == 3
    assert ours["ranks"][0]["streams"] == theirs["ranks"][0]["streams"]
    assert ours["devices"] == theirs["devices"]
    assert ours["verdict"]["kind"] == theirs["verdict"]["kind"]
    mine = sorted((row["name"], row["count"], round(row["total_us"], 6)) for row in ours["kernels"])
    assert mine == sorted((row["name"], row["count"], round(row["total_us"], 6)) for row in theirs["kernels"])
    step, twin = ours["ranks"][0]["steps"][0], theirs["ranks"][0]["steps"][0]
    assert step["busy_us"] == pytest.approx(twin["busy_us"]) and step["activities"] == twin["activities"]


def test_each_gpu_is_a_rank_with_its_process_cpu_side(tmp_path: Path) -> None:
    path = write_export(tmp_path / "two.sqlite", second_gpu=True)
    data = profile_parse([("two.sqlite", path.read_bytes())])  # bytes: read from a temporary copy
    assert [trace.rank for trace in data.ranks] == [0, 1]
    assert [trace.world_size for trace in data.ranks] == [2, 2]
    assert [trace.device for trace in data.ranks] == [GPU, GPU]
    assert data.ranks[0].runtime["cudaLaunchKernel"][0] == 3
    assert data.ranks[1].runtime["cudaLaunchKernel"] == [1, 1.0]
    assert data.ranks[1].ops == {} and data.ranks[0].steps and not data.ranks[1].steps
    summary = profile_analyse(data)
    assert summary["totals"]["kernels"] == 4 and summary["totals"]["kernel_us"] == pytest.approx(570.0)
    assert summary["ranks"][1]["busy_us"] == pytest.approx(300.0)
    assert summary["imbalance"]["slowest_rank"] == 1
    # Several exports together (one per node): their ranks follow one another.
    both = profile_parse([("a.sqlite", str(path)), ("b.sqlite", str(path))])
    assert [(trace.rank, trace.file) for trace in both.ranks] == [
        (0, "a.sqlite"),
        (1, "a.sqlite"),
        (2, "b.sqlite"),
        (3, "b.sqlite"),
    ]
    assert all(trace.world_size == 4 for trace in both.ranks)


def test_an_export_without_gpu_activity_says_so(tmp_path: Path) -> None:
    path = write_export(tmp_path / "cpu.sqlite")
    db = sqlite3.connect(path)
    for table in ("KERNEL", "MEMCPY", "MEMSET"):
        db.execute(f"DROP TABLE CUPTI_ACTIVITY_KIND_{table}")  # nsys writes no table without rows
    db.commit()
    db.close()
    data = profile_parse([("cpu.sqlite", str(path))])
    (trace,) = data.ranks
    assert trace.device == GPU and trace.events is not None and len(trace.events) == 0
    assert "no CUDA kernels" in data.warnings[0]
    assert trace.runtime["cudaLaunchKernel"][0] == 3  # the CPU side is still read


def _rewrite(path: Path, sql: str) -> Path:
    db = sqlite3.connect(path)
    db.executescript(sql)
    db.commit()
    db.close()
    return path


def test_bad_databases_are_refused_naming_what_is_wrong(tmp_path: Path, export: Path) -> None:
    other = tmp_path / "other.sqlite"
    _rewrite(other, "CREATE TABLE t (a INTEGER); INSERT INTO t VALUES (1);")
    with pytest.raises(ParseError, match=r"other.sqlite: a SQLite database but not an Nsight Systems export"):
        profile_parse([("other.sqlite", str(other))])
    # A truncated file: the header and schema are there, the tables' pages are not.
    cut = export.read_bytes()
    with pytest.raises(ParseError, match=r"cut.sqlite: .*(malformed|not a readable)"):
        profile_parse([("cut.sqlite", cut[: len(cut) // 3])])
    with pytest.raises(ParseError, match=r"tiny.sqlite: .*not a readable SQLite database"):
        profile_parse([("tiny.sqlite", cut[:200])])
    # Not SQLite at all: no profile format claims it, and the error names those tried.
    with pytest.raises(UnrecognisedFormat, match=r"nsys-sqlite"):
        profile_parse([("x.sqlite", b"\x00\x01 not a database " * 10)])
    renamed = write_export(tmp_path / "renamed.sqlite")
    _rewrite(renamed, "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME COLUMN demangledName TO nameX;")
    with pytest.raises(ParseError, match=r"table CUPTI_ACTIVITY_KIND_KERNEL has no column demangledName"):
        profile_parse([("renamed.sqlite", str(renamed))])
    backwards = write_export(tmp_path / "backwards.sqlite")
    _rewrite(backwards, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 1 WHERE rowid = 2;")
    with pytest.raises(ParseError, match=r"CUPTI_ACTIVITY_KIND_KERNEL row 2: end 1049999 is before start"):
        profile_parse([("backwards.sqlite", str(backwards))])
    _rewrite(
        backwards, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start + 1, start = 'soon' WHERE rowid = 2;"
    )
    with pytest.raises(ParseError, match=r"row 2: start 'soon' / end 1050001 are not integer nanoseconds"):
        profile_parse([("backwards.sqlite", str(backwards))])
    # A view in place of a table (a hostile file could make it expensive) is not read.
    hostile = write_export(tmp_path / "hostile.sqlite")
    _rewrite(
        hostile,
        "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL; "
        "CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS SELECT * FROM CUPTI_ACTIVITY_KIND_MEMSET;",
    )
    assert profile_analyse(profile_parse([("hostile.sqlite", str(hostile))]))["totals"]["kernels"] == 0


def test_an_unrecognised_result_file_names_the_profile_formats_tried() -> None:
    with pytest.raises(UnrecognisedFormat) as caught:
        detect(b"neither a result nor a trace\n", name="mystery.txt")
    assert {"kineto", "nsys-stats", "nsys-sqlite"} <= set(caught.value.tried)
    assert "nsys-sqlite" in str(caught.value)


def test_accelboard_parse_summarises_an_export(export: Path, tmp_path: Path, capsys: Any) -> None:
    assert accelboard_main(["accelboard", "parse", str(export), "--compact"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["source_format"] == "nsys-sqlite"
    assert summary["totals"]["busy_us"] == pytest.approx(235.0)
    other = _rewrite(tmp_path / "other.sqlite", "CREATE TABLE t (a INTEGER);")
    assert accelboard_main(["accelboard", "parse", str(other)]) == 2
    assert "not an Nsight Systems export" in capsys.readouterr().err


def _named(name: str, content: bytes) -> io.BytesIO:
    handle = io.BytesIO(content)
    handle.name = name
    return handle


@pytest.mark.django_db
def test_the_api_attaches_an_export_and_refuses_a_broken_one(
    ingest_token: str, export: Path, settings: Any, tmp_path: Path
) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    accelerator_type_from(H100)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {ingest_token}"}
    result = _named("vllm_2025.json", (FIXTURES / "vllm_2025.json").read_bytes())
    bad = Client().post(
        "/api/v1/runs",
        data={
            "file": [result],
            "profile": [_named("cut.sqlite", export.read_bytes()[:3000])],
            "accelerator": "H100 SXM 80GB",
        },
        **auth,
    )
    assert bad.status_code == 422, bad.json()
    assert "cut.sqlite" in bad.json()["error"]["message"]
    assert not BenchmarkRun.objects.exists() and not Profile.objects.exists()
    result.seek(0)
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 0  # uploads written to disk: read there, not copied
    response = Client().post(
        "/api/v1/runs",
        data={
            "file": [result],
            "profile": [_named("report.sqlite", export.read_bytes())],
            "accelerator": "H100 SXM 80GB",
        },
        **auth,
    )
    assert response.status_code == 201, response.json()
    profile = Profile.objects.get(run_id=response.json()["runs"][0]["id"])
    assert profile.source_format == "nsys-sqlite" and profile.timeline is True
    assert profile.busy_us == pytest.approx(235.0) and profile.devices == [GPU]


# The shared samples beside the checkout (``../shared``) or beside the worktrees' folder.
SAMPLES = next(
    (
        folder / "shared" / "samples" / "profiles" / "nsys_sqlite"
        for folder in Path(__file__).resolve().parents[2:5]
        if (folder / "shared" / "samples" / "profiles" / "nsys_sqlite").is_dir()
    ),
    None,
)


@pytest.mark.skipif(SAMPLES is None, reason="no shared nsys SQLite sample beside the checkout")
def test_the_shared_sample_matches_figures_read_from_it_by_hand() -> None:
    """Kernel count and time, busy time (the union of every GPU activity's interval) and span
    computed here from the rows, in integer nanoseconds, then compared with the importer's."""
    assert SAMPLES is not None
    for path in sorted(SAMPLES.rglob("*.sqlite")):
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        kernels = db.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
        intervals = list(kernels)
        for kind in ("MEMCPY", "MEMSET"):
            if f"CUPTI_ACTIVITY_KIND_{kind}" in tables:
                intervals += db.execute(f"SELECT start, end FROM CUPTI_ACTIVITY_KIND_{kind}").fetchall()
        db.close()
        busy, reach = 0, None
        for start, end in sorted(intervals):
            if reach is None or start > reach:
                busy, reach = busy + end - start, end
            elif end > reach:
                busy, reach = busy + end - reach, end
        span = max(end for _, end in intervals) - min(start for start, _ in intervals)
        summary = profile_analyse(profile_parse([(path.name, str(path))]))
        totals = summary["totals"]
        assert summary["source_format"] == "nsys-sqlite" and summary["timeline"] is True
        assert totals["kernels"] == len(kernels)
        assert totals["kernel_us"] == pytest.approx(
            sum(end - start for start, end in kernels) / 1e3, abs=1e-6
        )
        assert totals["busy_us"] == pytest.approx(busy / 1e3, abs=1e-6)
        assert totals["span_us"] == pytest.approx(span / 1e3, abs=1e-6)
        assert totals["categories"]["idle"] == pytest.approx((span - busy) / 1e3, abs=1e-6)
        assert summary["devices"] and all(summary["devices"])


@pytest.mark.django_db
def test_the_upload_page_and_the_profile_tab_take_an_export(
    login_client: Any, engineer: Any, team: Any, settings: Any, tmp_path: Path, export: Path
) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    accelerator_type_from(H100)
    client = login_client(engineer)
    files = [
        SimpleUploadedFile("vllm_2025.json", (FIXTURES / "vllm_2025.json").read_bytes()),
        SimpleUploadedFile("report.sqlite", export.read_bytes()),
    ]
    preview = client.post(reverse("benchmarks:upload_preview"), {"files": files}).json()
    entry = preview["files"][1]
    assert entry["error"] == "" and entry["profile"]["format"] == "nsys-sqlite"
    response = client.post(
        reverse("benchmarks:upload_save"),
        {"token": preview["token"], "team": team.pk, "r0-accelerator": "H100 SXM 80GB"},
    )
    assert response.status_code == 200, response.json()
    run_id = response.json()["runs"][0]["id"]
    profile = Profile.objects.get(run_id=run_id)
    assert profile.source_format == "nsys-sqlite" and profile.steps == 1
    page = client.get(reverse("profiles:run_profile", args=[run_id])).content.decode()
    assert "Nsight Systems SQLite export" in page and "ncclDevKernel_AllReduce" in page
    # A broken export on the Profile tab: a 400 naming it, and the profile kept.
    broken = SimpleUploadedFile("cut.sqlite", export.read_bytes()[:3000])
    refused = client.post(reverse("profiles:attach", args=[run_id]), {"profile": broken})
    assert refused.status_code == 400 and "cut.sqlite" in refused.content.decode()
    assert Profile.objects.get(run_id=run_id).pk == profile.pk


def test_an_export_beyond_the_activity_limit_is_refused_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from accelboard.importers import profile_data

    path = write_export(tmp_path / "big.sqlite", kernels=100)
    count = len(profile_parse([(path.name, str(path))]).ranks[0].events or [])
    assert count > 100
    # An activity counts 1.6 (its launch time and duration are joined): read at the limit ...
    monkeypatch.setattr(profile_data, "MAX_ACTIVITIES", int(count * profile_data.LAUNCH_WEIGHT) + 1)
    assert len(profile_parse([(path.name, str(path))]).ranks[0].events or []) == count
    # ... refused one below it, naming the file and the limit, with the API's code.
    limit = int(count * profile_data.LAUNCH_WEIGHT) - 1
    monkeypatch.setattr(profile_data, "MAX_ACTIVITIES", limit)
    with pytest.raises(profile_data.TooLarge) as refused:
        profile_parse([(path.name, str(path))])
    assert refused.value.code == "too_large" and refused.value.file == "big.sqlite"
    assert f"more than {limit:,} GPU activities" in str(refused.value)


def test_the_activity_limit_counts_every_export_of_the_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from accelboard.importers import profile_data

    first = write_export(tmp_path / "node0.sqlite", kernels=100)
    second = write_export(tmp_path / "node1.sqlite", kernels=100, seed=1)
    count = len(profile_parse([(first.name, str(first))]).ranks[0].events or [])
    # Each export alone is under the limit; the two together are past it: the second is named.
    monkeypatch.setattr(profile_data, "MAX_ACTIVITIES", int(1.5 * count * profile_data.LAUNCH_WEIGHT))
    assert profile_parse([(second.name, str(second))]).ranks
    with pytest.raises(profile_data.TooLarge) as refused:
        profile_parse([(first.name, str(first)), (second.name, str(second))])
    assert refused.value.file == "node1.sqlite"


@pytest.mark.django_db
def test_the_api_refuses_an_export_beyond_the_limit_storing_nothing(
    ingest_token: str, export: Path, settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from accelboard.importers import profile_data

    settings.MEDIA_ROOT = tmp_path / "media"
    accelerator_type_from(H100)
    monkeypatch.setattr(profile_data, "MAX_ACTIVITIES", 2)
    response = Client().post(
        "/api/v1/runs",
        data={
            "file": [_named("vllm_2025.json", (FIXTURES / "vllm_2025.json").read_bytes())],
            "profile": [_named("report.sqlite", export.read_bytes())],
            "accelerator": "H100 SXM 80GB",
        },
        HTTP_AUTHORIZATION=f"Bearer {ingest_token}",
    )
    assert response.status_code == 422, response.json()
    error = response.json()["error"]
    assert error["code"] == "too_large" and "report.sqlite" in error["message"]
    assert "more than 2 GPU activities" in error["message"]
    assert not BenchmarkRun.objects.exists() and not Profile.objects.exists()
