"""Profiler traces dropped on the upload page beside result files: previewed with them, attached
to the run saved from them.

``benchmarks.upload_services`` stashes every file, reads and saves the result files, and marks the
traces (``profile``) without reading them. These two services wrap its two steps for the page:

1. ``upload_preview_with_profiles``: the benchmarks preview, plus what the page shows of each
   trace (format, ranks, steps, verdict); a trace that cannot be read gets its error.
2. ``upload_save_with_profiles``: the benchmarks save, then the traces attached as one profile of
   the one run the upload saved (``profile_attach_to_upload``: zero or several runs is an error
   naming the count). The stash is discarded only when the runs and the profile are all saved, so
   a second save after a fix finds the saved runs again (same run ids).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from accelboard.benchmarks.models import BenchmarkRun
from accelboard.benchmarks.upload_services import (
    FileRead,
    RunSaved,
    StashedFile,
    SubmissionRead,
    upload_discard,
    upload_parse,
    upload_save,
)
from accelboard.core.models import Team

from .services import ProfileRejected, profile_attach_to_upload, profile_preview


@dataclass
class ProfileSaved:
    """The traces of one upload: the run their profile was attached to, or why it was not."""

    index: int
    name: str
    run_id: int | None = None
    error: str = ""


def upload_preview_with_profiles(
    *, user_id: int, files: list[tuple[str, bytes | None]], too_large: str = ""
) -> tuple[str, SubmissionRead, dict[int, dict[str, Any]]]:
    """``upload_parse``, and each readable trace's preview by file index."""
    token, submission = upload_parse(user_id=user_id, files=files, too_large=too_large)
    previews: dict[int, dict[str, Any]] = {}
    for read in submission.files:
        data = files[read.index][1]
        if not read.profile or data is None:
            continue
        try:
            preview = profile_preview(name=read.name, data=data)
        except ProfileRejected as exc:
            read.error = exc.message
            continue
        if preview is not None:
            previews[read.index] = preview
    return token, submission, previews


def upload_save_with_profiles(
    *,
    team: Team,
    token: str,
    user: Any,
    files: list[StashedFile],
    overrides: Mapping[int, dict[str, Any]],
    refused: Mapping[int, str],
) -> tuple[list[RunSaved], list[FileRead], ProfileSaved | None]:
    """``upload_save``, then the traces among ``files`` attached to the run it saved."""
    saved, reads = upload_save(
        team=team, token=token, user=user, files=files, overrides=overrides, refused=refused, discard=False
    )
    traces = [item for item in files if item.profile]
    attached = None
    if traces:
        attached = ProfileSaved(index=traces[0].index, name=", ".join(item.name for item in traces))
        runs = list(BenchmarkRun.objects.filter(pk__in={item.run_id for item in saved if item.run_id}))
        try:
            profile = profile_attach_to_upload(
                runs=runs, files=[(item.name, item.data) for item in traces], uploaded_by=user
            )
        except ProfileRejected as exc:
            attached.error = exc.message
        else:
            attached.run_id = profile.run_id if profile is not None else None
    failed = any(item.error for item in saved) or any(item.error for item in reads)
    if not failed and not (attached is not None and attached.error):
        upload_discard(token=token)
    return saved, reads, attached
