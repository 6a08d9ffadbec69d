"""The upload page's writes: files kept between its preview and its save, and the save itself.

The files of one upload are **one submission** (``importers.parse_files``): grouped as a directory
or an archive of them would be, so an MLPerf run's loose summary, detail log, system and
measurement JSON and accuracy.txt are one run, not five files asking for a model each.

1. ``upload_parse`` reads the files together and keeps every file's bytes (``upload_stash``)
   under a token; nothing is stored as a run yet.
2. ``upload_save`` reads the files back by token, reads them together again (the same runs in the
   same order) and stores each run for one team, all or nothing per run, with the uploader's
   fields for that run; run ids derive from the token and the run's place, so saving the same
   preview twice (a double click, a retry after fixing one run) keeps the runs saved the first
   time instead of copying them. A run read from several files keeps them all as its raw file
   (a .tar.gz of them); a run from one file or one archive keeps that file.

Profiler traces (PyTorch profiler JSON, nsys stats CSVs: ``importers.registry.profile_detect``)
dropped among the result files are not results: they are stashed with the others, marked
``profile`` and neither parsed nor saved here; the caller attaches them to the run saved with them
(``profiles.upload_services``), and keeps the stash (``discard=False``) until it has.

The preview step parses the files and stores their bytes under ``MEDIA_ROOT/tmp/<token>/``
(one file per upload plus a manifest naming the uploader); the save step reads them back by
token, so the browser never sends the bytes twice and never supplies them a second time
(what is saved is exactly what was previewed). A token belongs to the user who made it. The
directory is removed once every file is saved; abandoned ones are pruned after ``MAX_AGE_S``.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import secrets
import shutil
import tarfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from django.conf import settings

from accelboard.core.models import Team
from accelboard.importers import ParsedRun, parse_files
from accelboard.importers.registry import profile_detect

from .import_services import ImportRejected, run_import

MAX_AGE_S = 24 * 3600
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{20,64}$")


class UploadExpired(LookupError):
    """The token is unknown, malformed, another user's, or its files were already cleaned up."""


@dataclass(frozen=True)
class StashedFile:
    index: int
    name: str
    data: bytes

    @property
    def profile(self) -> bool:
        """A profiler trace or report rather than a result file."""
        return is_profile_trace(self.data)


def is_profile_trace(data: bytes) -> bool:
    """True for a profiler trace or report (PyTorch profiler JSON, nsys stats CSV)."""
    return bool(data) and profile_detect(data) is not None


def _root() -> Path:
    return Path(settings.MEDIA_ROOT) / "tmp"


def _dir(token: str) -> Path:
    if not _TOKEN.match(token or ""):
        raise UploadExpired("malformed upload token")
    return _root() / token


def upload_stash(*, user_id: int, files: list[tuple[str, bytes]]) -> str:
    """Write the files; return the token that finds them again."""
    upload_prune()
    token = secrets.token_urlsafe(24)
    folder = _dir(token)
    folder.mkdir(parents=True)
    for index, (_name, data) in enumerate(files):
        (folder / f"{index}.bin").write_bytes(data)
    manifest = {"user_id": user_id, "created": time.time(), "names": [name for name, _ in files]}
    # The manifest is written last: a folder without one is a stash that never finished.
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return token


def upload_load(*, token: str, user_id: int) -> list[StashedFile]:
    folder = _dir(token)
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError) as exc:
        raise UploadExpired(
            "upload not found: it was saved already or expired; upload the files again"
        ) from exc
    if manifest.get("user_id") != user_id:
        raise UploadExpired("upload not found: it was saved already or expired; upload the files again")
    return [
        StashedFile(index=i, name=name, data=(folder / f"{i}.bin").read_bytes())
        for i, name in enumerate(manifest["names"])
    ]


def upload_discard(*, token: str) -> None:
    shutil.rmtree(_dir(token), ignore_errors=True)


def upload_prune(*, max_age_s: int = MAX_AGE_S, now: float | None = None) -> int:
    """Remove stashes older than ``max_age_s`` (by folder time); return how many went."""
    root = _root()
    if not root.is_dir():
        return 0
    cutoff = (now if now is not None else time.time()) - max_age_s
    removed = 0
    for folder in root.iterdir():
        if folder.is_dir() and folder.stat().st_mtime < cutoff:
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
    return removed


@dataclass
class FileRead:
    """One uploaded file: which runs were read from it, or why it could not be read; a profiler
    trace is marked ``profile`` and not read."""

    index: int
    name: str
    size: int
    runs: list[int] = field(default_factory=list)
    error: str = ""
    profile: bool = False


@dataclass
class RunRead:
    """One run of the submission and the files (indexes) it was read from."""

    index: int
    parsed: ParsedRun
    files: tuple[int, ...]


@dataclass
class SubmissionRead:
    files: list[FileRead]
    runs: list[RunRead]


@dataclass
class RunSaved:
    """What saving one run did: the run stored (id, created) or why it was not."""

    index: int
    files: tuple[int, ...]
    run_id: int | None = None
    created: bool = False
    error: str = ""


def _read(files: list[tuple[int, str, bytes | None]], too_large: str = "") -> SubmissionRead:
    """Read the result files among ``files`` (index, name, bytes; None: refused) as one submission."""
    reads = {index: FileRead(index=index, name=name, size=len(data or b"")) for index, name, data in files}
    results: list[tuple[int, str, bytes]] = []
    for index, name, data in files:
        if data is None:
            reads[index].error = f"{name}: {too_large}"
        elif is_profile_trace(data):
            reads[index].profile = True
        else:
            results.append((index, name, data))
    runs: list[RunRead] = []
    if results:
        submission = parse_files([(name, data) for _, name, data in results])
        for number, (parsed, sources) in enumerate(zip(submission.runs, submission.sources, strict=True)):
            given = tuple(results[source][0] for source in sources)
            runs.append(RunRead(index=number, parsed=parsed, files=given))
            for index in given:
                reads[index].runs.append(number)
        for error, source in zip(submission.errors, submission.error_sources, strict=True):
            if source is not None:
                read = reads[results[source][0]]
                read.error = f"{read.error}; {error}" if read.error else str(error)
            else:  # not tied to one file: shown on the first
                first = reads[results[0][0]]
                first.error = f"{first.error}; {error}" if first.error else str(error)
    return SubmissionRead(files=[reads[index] for index, _, _ in files], runs=runs)


def upload_parse(
    *, user_id: int, files: list[tuple[str, bytes | None]], too_large: str = ""
) -> tuple[str, SubmissionRead]:
    """Read the files as one submission and keep their bytes under a new token; a file given as
    None was refused before reading (``too_large`` says why) and is kept empty so the indexes stay
    aligned."""
    read = _read([(index, name, data) for index, (name, data) in enumerate(files)], too_large)
    token = upload_stash(user_id=user_id, files=[(name, data or b"") for name, data in files])
    return token, read


def _run_uuid(token: str, run_index: int) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_URL, f"accelboard-upload:{token}:run:{run_index}")


def run_raw_files(run: RunRead, files: Mapping[int, StashedFile]) -> tuple[str, bytes]:
    """The raw file a run keeps: its one file (or archive) as uploaded, or a .tar.gz of its files
    (the same bytes for the same files, so a retried upload is recognised)."""
    members = [files[index] for index in run.files]
    if len(members) == 1:
        return members[0].name, members[0].data
    return f"{PurePosixPath(members[0].name).name}-and-{len(members) - 1}-more.tar.gz", files_tar(
        [(item.name, item.data) for item in members]
    )


def files_tar(files: list[tuple[str, bytes]]) -> bytes:
    """A reproducible .tar.gz of (name, bytes): no times, owners or modes that vary."""
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as zipped:
        with tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as archive:
            for name, data in files:
                info = tarfile.TarInfo(name=name.replace("\\", "/").lstrip("/") or "file")
                info.size, info.mtime, info.mode = len(data), 0, 0o644
                archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def upload_save(
    *,
    team: Team,
    token: str,
    user: Any,
    files: list[StashedFile],
    overrides: Mapping[int, dict[str, Any]],
    refused: Mapping[int, str],
    discard: bool = True,
) -> tuple[list[RunSaved], list[FileRead]]:
    """Store the runs of the stashed ``files`` for ``team``, each with its ``overrides`` (by run
    index); return what each run did, and the files (their read errors are errors of the save).

    A run in ``refused`` (its fields did not validate) is skipped with that error. The stash is
    discarded once every run is saved and every file was read (unless ``discard`` is False: the
    caller has more to do with it); otherwise it stays, so a second save after a fix stores the
    failed runs and finds the saved ones already there (same run ids). Profiler traces are not
    runs: they are skipped here."""
    read = _read([(item.index, item.name, item.data) for item in files])
    by_index = {item.index: item for item in files}
    results: list[RunSaved] = []
    for run in read.runs:
        saved = RunSaved(index=run.index, files=run.files)
        results.append(saved)
        if run.index in refused:
            saved.error = refused[run.index]
            continue
        raw_name, raw_bytes = run_raw_files(run, by_index)
        try:
            stored, created = run_import(
                team=team,
                parsed=run.parsed,
                raw_name=raw_name,
                raw_bytes=raw_bytes,
                uploaded_by=user,
                uploaded_via="web",
                overrides=dict(overrides.get(run.index, {})),
                run_uuid=_run_uuid(token, run.index),
            )
        except ImportRejected as exc:
            saved.error = str(exc)
            continue
        saved.run_id, saved.created = stored.pk, created
    failed = any(saved.error for saved in results) or any(item.error for item in read.files)
    if discard and not failed:
        upload_discard(token=token)
    return results, read.files
