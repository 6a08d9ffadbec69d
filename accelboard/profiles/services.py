"""Attach a profile to a run: read the files, analyse them, store the aggregates.

``profile_attach`` is the one write: the upload page, ``POST /api/v1/runs`` (multipart
``profile`` parts), ``POST /api/v1/runs/<id>/profile`` and the run's Profile tab all call it. The
files are streamed in bounded memory (a child process reads a large upload, so the server gives
the memory back) and only aggregates are stored; the raw files are kept only when asked
(``keep_raw``).
"""

from __future__ import annotations

import io
import json
import multiprocessing
import os
import tarfile
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from django.core.files.base import ContentFile, File
from django.db import transaction

from accelboard.benchmarks.models import BenchmarkRun
from accelboard.core.services import stored_file_track
from accelboard.importers.base import ParseError, UnrecognisedFormat
from accelboard.importers.profile_data import ProfileData, steady_heap
from accelboard.importers.profile_registry import profile_detect, profile_parse

from . import categories as cats
from .analysis import mark_unknown_groups
from .device_match import device_mismatch, summary_world_size
from .hta import profile_summary
from .models import ANALYSIS_VERSION, Profile, ProfileBreakdown, ProfileKernel, ProfileRank
from .verdict import profile_findings, profile_verdict

Source = str | Path | bytes | IO[bytes]


class ProfileRejected(ValueError):
    """Files that cannot be a profile: the message names the file (and line or offset). ``code``:
    ``parse_error``, ``too_large`` for a profile beyond the importers' limit of GPU activities
    (``profile_data.MAX_ACTIVITIES``), or ``device_mismatch`` for a strict attach of a trace from
    other hardware."""

    def __init__(
        self, message: str, *, field: str = "profile", code: str = "parse_error", reasons: Sequence[str] = ()
    ):
        self.message = message
        self.field = field
        self.code = code
        self.reasons = list(reasons)  # device_mismatch: one sentence per disagreement, naming both sides
        super().__init__(message)


def is_profile(source: Source) -> bool:
    """True when the file is a profiler trace or report (not a benchmark result)."""
    return profile_detect(source) is not None


def _rewind(sources: Sequence[tuple[str, Source]]) -> None:
    for _name, source in sources:
        if hasattr(source, "seek"):
            source.seek(0)


# Files of more bytes than this together are read in a child process: the reading's peak memory
# is the child's and goes back to the system when it ends, where a long-lived server process
# would keep its high-water mark (freed Python objects stay in its arenas).
CHILD_PROCESS_BYTES = 16 * 1024 * 1024


def profile_summarise(*, files: Sequence[tuple[str, Source]]) -> dict[str, Any]:
    """Parse and analyse without storing (the upload preview); raises ProfileRejected."""
    try:
        if _size(files) > CHILD_PROCESS_BYTES and "fork" in multiprocessing.get_all_start_methods():
            return _summarise_in_child(files)
        data = profile_parse(list(files))
    except (ParseError, UnrecognisedFormat) as exc:
        raise ProfileRejected(str(exc), code=_code(exc)) from None
    finally:
        _rewind(files)
    return _summary(data)


def _code(exc: Exception) -> str:
    """``too_large`` for a profile beyond the importer's declared limit, else ``parse_error``."""
    return str(getattr(exc, "code", "parse_error"))


def _summary(data: ProfileData) -> dict[str, Any]:
    summary = profile_summary(data)
    summary["world_size"] = summary_world_size(data.ranks)
    return summary


def _size(files: Sequence[tuple[str, Source]]) -> int:
    total = 0
    for _name, source in files:
        if isinstance(source, bytes):
            total += len(source)
        elif isinstance(source, (str, Path)):
            total += os.path.getsize(source) if os.path.exists(source) else 0
        elif hasattr(source, "seek") and hasattr(source, "tell"):
            at = source.tell()
            source.seek(0, io.SEEK_END)
            total += source.tell() - at
            source.seek(at)
    return total


def _summarise_in_child(files: Sequence[tuple[str, Source]]) -> dict[str, Any]:
    """``profile_parse`` + ``profile_summary`` in a forked child (it inherits the open files);
    the summary, or the ParseError's message, comes back through a pipe."""
    context = multiprocessing.get_context("fork")
    reader, writer = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(list(files), writer), daemon=True)
    child.start()
    writer.close()
    try:
        outcome, payload = reader.recv()
    except EOFError:
        outcome, payload = "crash", None
    finally:
        reader.close()
        child.join()
    if outcome == "rejected":
        raise ProfileRejected(payload[0], code=payload[1])
    if outcome != "ok":
        raise RuntimeError(f"profile: the process reading the files ended with code {child.exitcode}")
    return payload


def _child(files: list[tuple[str, Source]], writer: Any) -> None:
    steady_heap()
    try:
        writer.send(("ok", _summary(profile_parse(files))))
    except (ParseError, UnrecognisedFormat) as exc:
        writer.send(("rejected", (str(exc), _code(exc))))
    finally:
        writer.close()


def profile_attach(
    *,
    run: BenchmarkRun,
    files: Sequence[tuple[str, Source]],
    uploaded_by: Any = None,
    keep_raw: bool = False,
    strict: bool = False,
) -> Profile:
    """Read ``files`` (the ranks of one Kineto profile, or one profile's nsys stats reports) and
    store their aggregates as the run's profile, replacing any earlier one. All or nothing.

    A trace from other hardware than the run's (``device_match``) is stored with a warning first
    among the profile's warnings; with ``strict`` it is refused (``ProfileRejected``, code
    ``device_mismatch``) and the earlier profile stays."""
    if not files:
        raise ProfileRejected("profile: no files")
    summary = profile_summarise(files=files)
    mismatch = device_mismatch(
        run=run, devices=summary["devices"], ranks=len(summary["ranks"]), world_size=summary["world_size"]
    )
    if mismatch and strict:
        raise ProfileRejected(
            "; ".join(mismatch) + " (attached only without strict)", code="device_mismatch", reasons=mismatch
        )
    summary["warnings"] = mismatch + list(summary["warnings"])
    with transaction.atomic():
        Profile.objects.filter(run=run).delete()
        profile = Profile.objects.create(
            run=run,
            files=[name for name, _ in files],
            uploaded_by=uploaded_by if getattr(uploaded_by, "pk", None) else None,
            **_profile_fields(summary),
        )
        _children_store(profile, summary)
        if keep_raw:
            name, content = _raw(files)
            profile.raw_filename = name
            profile.raw_file.save(name, content, save=False)
            stored_file_track(storage=profile.raw_file.storage, name=profile.raw_file.name or "")
            profile.save(update_fields=["raw_file", "raw_filename"])
    return profile


def _profile_fields(summary: dict[str, Any]) -> dict[str, Any]:
    """The ``Profile`` columns a summary gives (``warnings`` with the device mismatches first)."""
    return {
        "source_format": summary["source_format"],
        "ranks": len(summary["ranks"]),
        "steps": summary["totals"]["steps"],
        "timeline": summary["timeline"],
        "devices": summary["devices"],
        "span_us": summary["totals"]["span_us"],
        "busy_us": summary["totals"].get("busy_us") or 0.0,
        "verdict_kind": summary["verdict"]["kind"],
        "verdict": summary["verdict"],
        "findings": summary["findings"],
        "totals": dict(summary["totals"]),
        "precision": summary["precision"],
        "imbalance": _json_keys(summary["imbalance"]),
        "ops": summary["ops"],
        "warnings": summary["warnings"],
        "hta": summary["hta"],
        "analysis_version": ANALYSIS_VERSION,
    }


def _children_store(profile: Profile, summary: dict[str, Any]) -> None:
    ProfileRank.objects.bulk_create(_rank_rows(profile, summary))
    ProfileBreakdown.objects.bulk_create(_breakdown_rows(profile, summary), batch_size=2000)
    ProfileKernel.objects.bulk_create(_kernel_rows(profile, summary), batch_size=2000)


def _json_keys(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """JSON objects have string keys: rank numbers as strings, stated here rather than by the driver."""
    if value is None:
        return None
    return {
        k: ({str(r): v for r, v in val.items()} if isinstance(val, dict) else val) for k, val in value.items()
    }


def _rank_rows(profile: Profile, summary: dict[str, Any]) -> list[ProfileRank]:
    return [
        ProfileRank(
            profile=profile,
            rank=rank["rank"],
            device=rank["device"][:120],
            file=str(rank["file"])[:255],
            span_us=rank["span_us"],
            busy_us=rank["busy_us"] or 0.0,
            communication_us=rank["communication_us"],
            overlap_us=rank["overlap_us"],
            idle_host_us=rank["idle_host_us"],
            idle_other_us=rank["idle_other_us"],
            idle_unknown_us=rank["idle_unknown_us"],
            kernels=rank["kernels"],
            short_kernels=rank["short_kernels"],
            launch_us_mean=rank["launch_us_mean"],
            streams=rank["streams"],
        )
        for rank in summary["ranks"]
    ]


def _breakdown_rows(profile: Profile, summary: dict[str, Any]) -> list[ProfileBreakdown]:
    rows = []
    for rank in summary["ranks"]:
        windows = [(None, rank["categories"])] + [
            (step["step"], step["categories"]) for step in rank["steps"]
        ]
        for step, categories in windows:
            for category, time_us in categories.items():
                if time_us is not None and (time_us > 0 or category == "idle"):
                    rows.append(
                        ProfileBreakdown(
                            profile=profile, rank=rank["rank"], step=step, category=category, time_us=time_us
                        )
                    )
    return rows


def _kernel_rows(profile: Profile, summary: dict[str, Any]) -> list[ProfileKernel]:
    return [
        ProfileKernel(
            profile=profile,
            name=row["name"],
            kind=row["kind"],
            category=row["category"],
            precision=row["precision"],
            count=row["count"],
            total_us=row["total_us"],
            min_us=row["min_us"],
            max_us=row["max_us"],
            ranks=row.get("ranks", 1),
        )
        for row in summary["kernels"]
    ]


def _raw(files: Sequence[tuple[str, Source]]) -> tuple[str, File]:
    """The uploaded file as it came, or several as one .tar.gz."""
    if len(files) == 1:
        name, source = files[0]
        return os.path.basename(name), _as_file(source)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, source in files:
            handle = _as_file(source)
            info = tarfile.TarInfo(os.path.basename(name))
            info.size = handle.size
            archive.addfile(info, handle)
    return "profile.tar.gz", ContentFile(buffer.getvalue())


def _as_file(source: Source) -> File:
    if isinstance(source, bytes):
        return ContentFile(source)
    if isinstance(source, (str, Path)):
        return File(open(source, "rb"))  # noqa: SIM115 - read and closed by the storage
    source.seek(0)
    return File(source)


def profile_preview(*, name: str, data: bytes) -> dict[str, Any] | None:
    """What the upload page shows of a trace dropped with result files: None when the file is not a
    profile; raises ProfileRejected when it is one but cannot be read."""
    if not is_profile(data):
        return None
    summary = profile_summarise(files=[(name, data)])
    return {
        "format": summary["source_format"],
        "ranks": len(summary["ranks"]),
        "steps": summary["totals"]["steps"],
        "verdict": summary["verdict"]["headline"],
    }


def profile_attach_to_upload(
    *,
    runs: Sequence[BenchmarkRun],
    files: Sequence[tuple[str, Source]],
    uploaded_by: Any = None,
    strict: bool = False,
) -> Profile | None:
    """Attach the profile files of an upload to the run saved with them: the upload must have
    produced exactly one run (a profile belongs to one run)."""
    if not files:
        return None
    distinct = {run.pk: run for run in runs}
    if len(distinct) != 1:
        raise ProfileRejected(
            f"a profile belongs to one run, and this upload saved {len(distinct)}: "
            "upload the trace with its own result file, or attach it on the run's Profile tab"
        )
    return profile_attach(
        run=next(iter(distinct.values())), files=files, uploaded_by=uploaded_by, strict=strict
    )


# --- re-deriving stored verdicts -------------------------------------------------------------------


@dataclass(frozen=True)
class Reanalysis:
    """What ``profile_reanalyse`` did to one profile. ``source``: ``raw`` (the kept raw files read
    again: everything re-derived) or ``stored`` (the stored breakdown and kernels: the verdict and
    findings only). ``changed``: the verdict's kind, headline, details or unknowns, or the findings,
    read differently (numbers that moved only in their last bits do not count)."""

    profile_id: int
    run_id: int
    source: str
    version_before: int
    kind_before: str
    kind_after: str
    headline_before: str
    headline_after: str
    changed: bool
    saved: bool


def _wording(verdict: dict[str, Any], findings: Sequence[str]) -> tuple[Any, ...]:
    return (
        verdict.get("kind"),
        verdict.get("headline"),
        list(verdict.get("details") or []),
        list(verdict.get("unknown") or []),
        list(findings),
    )


def profile_reanalyse(*, profile: Profile, dry_run: bool = False) -> Reanalysis:
    """Derive ``profile``'s verdict again by the current rules (``ANALYSIS_VERSION``) and store it.

    With the raw files kept (``keep_raw``) they are read again and everything is re-derived as on
    attaching: breakdown, ranks, kernels, HTA analyses, device warnings, verdict and findings.
    Without them, the verdict and findings are recomputed from what is stored: the per-rank
    category times (``ProfileBreakdown``, whole ranks) give the category, group and share totals,
    the stored totals the counts and means (kernels, short kernels, launch and kernel means, idle
    splits), the stored kernel rows the top kernels, and the stored precision and imbalance the
    findings; the breakdown, kernels and HTA analyses stay as stored. ``dry_run``: nothing written."""
    before = (profile.verdict_kind, profile.verdict, profile.findings)
    if profile.raw_file:
        source = "raw"
        summary = _raw_summary(profile)
    else:
        source = "stored"
        summary = _stored_summary(profile)
    summary["verdict"] = profile_verdict(summary)
    summary["findings"] = profile_findings(summary)
    changed = _wording(before[1] or {"kind": before[0]}, before[2] or []) != _wording(
        summary["verdict"], summary["findings"]
    )
    outcome = Reanalysis(
        profile_id=profile.pk,
        run_id=profile.run_id,
        source=source,
        version_before=profile.analysis_version,
        kind_before=before[0],
        kind_after=summary["verdict"]["kind"],
        headline_before=str((before[1] or {}).get("headline", "")),
        headline_after=summary["verdict"]["headline"],
        changed=changed,
        saved=not dry_run
        and (
            changed
            or profile.analysis_version != ANALYSIS_VERSION
            or (source == "raw" and _json_text(profile.hta) != _json_text(summary["hta"]))
        ),
    )
    if not outcome.saved:
        return outcome
    with transaction.atomic():
        locked = Profile.objects.select_for_update().get(pk=profile.pk)
        if source == "raw":
            for name, value in _profile_fields(summary).items():
                setattr(locked, name, value)
            locked.rank_rows.all().delete()
            locked.breakdown.all().delete()
            locked.kernels.all().delete()
            _children_store(locked, summary)
        else:
            locked.verdict_kind = summary["verdict"]["kind"]
            locked.verdict = summary["verdict"]
            locked.findings = summary["findings"]
            locked.analysis_version = ANALYSIS_VERSION
        locked.save()
    profile.refresh_from_db()
    return outcome


def _json_text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _raw_summary(profile: Profile) -> dict[str, Any]:
    """The kept raw files read again (one file as uploaded, several as the ``.tar.gz`` ``_raw``
    wrote), with the device comparison of attaching."""
    with tempfile.TemporaryDirectory(prefix="profile-reanalyse-") as folder:
        with profile.raw_file.open("rb") as handle:
            if len(profile.files) > 1:
                with tarfile.open(fileobj=handle, mode="r:gz") as archive:
                    archive.extractall(folder, filter="data")
                    names = [member.name for member in archive.getmembers() if member.isfile()]
                files: list[tuple[str, Source]] = [(name, Path(folder) / name) for name in names]
            else:
                files = [(profile.raw_filename or profile.files[0], handle)]
            summary = profile_summarise(files=files)
    mismatch = device_mismatch(
        run=profile.run,
        devices=summary["devices"],
        ranks=len(summary["ranks"]),
        world_size=summary["world_size"],
    )
    summary["warnings"] = mismatch + list(summary["warnings"])
    return summary


def _stored_summary(profile: Profile) -> dict[str, Any]:
    """What ``verdict.profile_verdict`` and ``profile_findings`` read, rebuilt from the stored rows."""
    timeline = profile.timeline
    totals = dict(profile.totals or {})
    categories: dict[str, float | None] = dict.fromkeys(cats.ALL, 0.0)
    for category, time_us in profile.breakdown.filter(step__isnull=True).values_list("category", "time_us"):
        if category in categories:
            categories[category] = (categories[category] or 0.0) + time_us
    if not timeline:
        categories[cats.IDLE] = None
    base = profile.span_us if timeline else profile.busy_us
    groups: dict[str, float | None] = dict.fromkeys(cats.GROUPS, 0.0)
    for key, value in categories.items():
        if value is not None:
            groups[cats.GROUP[key]] = (groups[cats.GROUP[key]] or 0.0) + value
    if not timeline:
        groups[cats.IDLE] = None

    def shares(values: dict[str, float | None]) -> dict[str, float | None]:
        return {key: (value / base if base and value is not None else None) for key, value in values.items()}

    totals.update(
        categories=categories,
        shares=shares(categories),
        groups=groups,
        group_shares=shares(groups),
        span_us=profile.span_us,
        busy_us=profile.busy_us,
        base_us=base or 0.0,
    )
    if not timeline:
        mark_unknown_groups(totals)
    if "kernels" not in totals:  # profiles stored before the totals held the counts
        totals["kernels"] = sum(profile.rank_rows.values_list("kernels", flat=True))
    kernels = [
        {"name": name, "kind": kind, "category": category, "total_us": total_us}
        for name, kind, category, total_us in profile.kernels.order_by("-total_us", "pk").values_list(
            "name", "kind", "category", "total_us"
        )[:50]
    ]
    return {
        "timeline": timeline,
        "devices": list(profile.devices or []),
        "totals": totals,
        "kernels": kernels,
        "precision": profile.precision or {"hint": None},
        "imbalance": profile.imbalance,
    }
