"""Re-deriving stored verdicts: ``profile_reanalyse`` and ``manage.py profiles_reanalyse``.

An old-style profile (version 1) from an nsys stats report called "Compute-bound" becomes the
evidence-only verdict the same files give today; a second run changes nothing; from the stored
breakdown the verdict of a Kineto trace is the one attaching gave; kept raw files re-derive
everything (HTA analyses included); the page says when a verdict is from an older analysis."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from accelboard.benchmarks.models import BenchmarkRun
from accelboard.profiles.models import ANALYSIS_VERSION, Profile
from accelboard.profiles.services import profile_attach, profile_reanalyse, profile_summarise
from accelboard.testing.traces import write_training_trace
from tests import factories

from .test_nsys_import import API_SUM, KERN_SUM, MEM_SUM

NSYS = [
    ("run_cuda_gpu_kern_sum.csv", KERN_SUM.encode()),
    ("run_cuda_gpu_mem_time_sum.csv", MEM_SUM.encode()),
    ("run_cuda_api_sum.csv", API_SUM.encode()),
]
# What the rules before version 2 stored for these reports (no timeline, yet a bound claimed).
OLD_VERDICT = {
    "kind": "compute-bound",
    "headline": "Compute-bound: the GPU is busy with compute 82% of the time",
    "details": ["Look at the top kernels: cutlass (gemm, 6.00 ms)."],
    "numbers": {"idle_share": None},
    "top_kernels": [],
}


@pytest.fixture
def h100_run(team: Any, settings: Any, tmp_path: Path) -> BenchmarkRun:
    settings.MEDIA_ROOT = tmp_path / "media"
    return factories.run_create(team=team, accelerator_type=factories.accelerator_type_from(factories.H100))


def _trace(**options: Any) -> bytes:
    buffer = io.BytesIO()
    write_training_trace(buffer, steps=3, layers=3, **options)
    return buffer.getvalue()


def _make_old(profile: Profile) -> None:
    Profile.objects.filter(pk=profile.pk).update(
        verdict_kind="compute-bound", verdict=OLD_VERDICT, findings=[], analysis_version=1
    )


def _command(*args: str) -> str:
    out = io.StringIO()
    call_command("profiles_reanalyse", *args, stdout=out)
    return out.getvalue()


def test_an_old_nsys_stats_compute_bound_verdict_becomes_the_evidence_only_one(
    h100_run: BenchmarkRun,
) -> None:
    profile = profile_attach(run=h100_run, files=NSYS)
    _make_old(profile)
    fresh = profile_summarise(files=NSYS)["verdict"]
    assert fresh["kind"] == "no-timeline"  # the rules of today, computed apart from the stored rows

    dry = _command("--dry-run")
    assert "1 verdict(s) would change" in dry and "nothing written" in dry
    assert Profile.objects.get(pk=profile.pk).verdict_kind == "compute-bound"

    out = _command()
    assert f"run {h100_run.pk}: compute-bound -> no-timeline (version 1, from the stored breakdown)" in out
    assert out.strip().endswith(
        "1 profile(s) re-derived: 1 verdict(s) changed; 0 from raw files, 1 from the stored breakdown, 0 failed"
    )
    stored = Profile.objects.get(pk=profile.pk)
    assert stored.verdict_kind == "no-timeline" and stored.analysis_version == ANALYSIS_VERSION
    for key in ("kind", "headline", "details", "unknown"):
        assert stored.verdict[key] == fresh[key], key
    assert "idle time (no timeline in this format)" in stored.verdict["unknown"]

    again = _command()
    assert "0 verdict(s) changed" in again
    assert Profile.objects.get(pk=profile.pk).verdict == stored.verdict


def test_from_the_stored_breakdown_a_kineto_verdict_is_the_one_attaching_gave(h100_run: BenchmarkRun) -> None:
    files = [("r0.json", _trace(input_wait_us=20_000.0))]
    profile = profile_attach(run=h100_run, files=files)
    attached = (profile.verdict, profile.findings)
    assert profile.timeline and profile.verdict_kind == "idle"
    unchanged = profile_reanalyse(profile=profile)
    assert (unchanged.source, unchanged.changed) == ("stored", False)
    _make_old(profile)
    outcome = profile_reanalyse(profile=Profile.objects.get(pk=profile.pk))
    assert (outcome.kind_before, outcome.kind_after, outcome.changed) == ("compute-bound", "idle", True)
    stored = Profile.objects.get(pk=profile.pk)
    for key in ("kind", "headline", "details", "unknown", "top_kernels"):
        assert stored.verdict[key] == attached[0][key], key
    for key, value in attached[0]["numbers"].items():
        assert stored.verdict["numbers"][key] == pytest.approx(value, rel=1e-12), key
    assert stored.findings == attached[1]


def test_kept_raw_files_re_derive_everything(h100_run: BenchmarkRun) -> None:
    h100_run.accelerator_count = 2
    h100_run.save(update_fields=["accelerator_count"])
    files = [
        ("rank0.json", _trace(rank=0, world_size=2)),
        ("rank1.json", _trace(rank=1, world_size=2, input_wait_us=5_000.0)),
    ]
    profile = profile_attach(run=h100_run, files=files, keep_raw=True)
    attached = Profile.objects.get(pk=profile.pk)
    kernels = list(attached.kernels.values_list("name", "count", "total_us"))
    _make_old(profile)
    Profile.objects.filter(pk=profile.pk).update(hta={})
    profile.kernels.all().delete()
    outcome = profile_reanalyse(profile=Profile.objects.get(pk=profile.pk))
    assert outcome.source == "raw" and outcome.changed
    stored = Profile.objects.get(pk=profile.pk)
    assert stored.hta == attached.hta and stored.hta
    assert stored.verdict == attached.verdict and stored.findings == attached.findings
    assert list(stored.kernels.values_list("name", "count", "total_us")) == kernels
    assert stored.raw_file.name == attached.raw_file.name and stored.files == ["rank0.json", "rank1.json"]


def test_a_kept_single_trace_is_read_again_and_a_second_pass_writes_nothing(h100_run: BenchmarkRun) -> None:
    profile = profile_attach(run=h100_run, files=[("r0.pt.trace.json", _trace())], keep_raw=True)
    attached = Profile.objects.get(pk=profile.pk)
    _make_old(profile)
    Profile.objects.filter(pk=profile.pk).update(hta={})
    first = profile_reanalyse(profile=Profile.objects.get(pk=profile.pk))
    assert (first.source, first.changed, first.saved) == ("raw", True, True)
    stored = Profile.objects.get(pk=profile.pk)
    assert stored.verdict == attached.verdict and stored.hta == attached.hta
    rows = list(stored.breakdown.values_list("pk", flat=True))
    second = profile_reanalyse(profile=stored)
    assert (second.changed, second.saved) == (False, False)
    assert list(Profile.objects.get(pk=profile.pk).breakdown.values_list("pk", flat=True)) == rows


def test_run_filter_and_a_run_without_a_profile(h100_run: BenchmarkRun, team: Any) -> None:
    other = factories.run_create(team=team)
    for run in (h100_run, other):
        _make_old(profile_attach(run=run, files=NSYS))
    out = _command("--run", str(other.pk))
    assert "1 profile(s) re-derived: 1 verdict(s) changed" in out
    assert Profile.objects.get(run=h100_run).verdict_kind == "compute-bound"
    with pytest.raises(CommandError, match="has no profile"):
        _command("--run", str(other.pk + 1000))


def test_the_pages_say_when_a_verdict_is_from_an_older_analysis(
    h100_run: BenchmarkRun, team: Any, engineer: Any, login_client: Any
) -> None:
    other = factories.run_create(team=team, accelerator_type=h100_run.accelerator_type)
    _make_old(profile_attach(run=h100_run, files=NSYS))
    profile_attach(run=other, files=NSYS)
    client = login_client(engineer)
    old_page = client.get(reverse("profiles:run_profile", args=[h100_run.pk])).content.decode()
    assert (
        'id="profile-analysis-old"' in old_page and "older analysis (version 1; the current is 2)" in old_page
    )
    assert f"profiles_reanalyse --run {h100_run.pk}" in old_page
    new_page = client.get(reverse("profiles:run_profile", args=[other.pk])).content.decode()
    assert 'id="profile-analysis-old"' not in new_page
    compare = client.get(reverse("profiles:compare") + f"?a={h100_run.pk}&b={other.pk}").content.decode()
    assert compare.count("data-analysis-old") == 1
    _command()
    assert (
        'id="profile-analysis-old"'
        not in client.get(reverse("profiles:run_profile", args=[h100_run.pk])).content.decode()
    )


def test_nsys_stats_without_the_memory_report_says_memory_unknown_not_zero(h100_run: BenchmarkRun) -> None:
    kernels_only = [NSYS[0], NSYS[2]]
    profile = profile_attach(run=h100_run, files=kernels_only)
    summary = profile_summarise(files=kernels_only)
    totals = summary["totals"]
    assert totals["unknown_groups"] == ["memory"]
    assert totals["group_shares"]["memory"] is None and totals["categories"]["memcpy_htod"] is None
    assert totals["group_shares"]["compute"] + totals["group_shares"]["communication"] == pytest.approx(1.0)
    assert "memory time (its report is not among the files)" in summary["verdict"]["unknown"]
    assert any("no memory report" in warning for warning in summary["warnings"])
    # Re-derived from the stored rows, memory stays unknown.
    _make_old(profile)
    profile_reanalyse(profile=Profile.objects.get(pk=profile.pk))
    stored = Profile.objects.get(pk=profile.pk)
    assert "memory time (its report is not among the files)" in stored.verdict["unknown"]
    # With the memory report, memory is measured (and not unknown).
    both = profile_summarise(files=NSYS)["totals"]
    assert "unknown_groups" not in both and both["group_shares"]["memory"] > 0
