"""The upload page's stash: files kept between its preview and its save, and how they are read.

The files of one upload are **one submission** (``importers.parse_files``): grouped as a directory
or an archive of them would be, so an MLPerf run's loose summary, detail log, system and
measurement JSON and accuracy.txt are one run, not five files asking for a model each.

1. ``upload_parse`` reads the files together and keeps every file's bytes (``upload_stash``)
   under a token; nothing is stored as a run yet.
2. ``upload_load`` reads the files back by token; ``arrival_services.upload_save`` reads them
   together again (``submission_read``: the same runs in the same order) and stores each run. A
   run read from several files keeps them all as its raw file (``run_raw_files``: a .tar.gz of
   them); a run from one file or one archive keeps that file.

Profiler traces (PyTorch profiler JSON, nsys stats CSVs: ``importers.profile_registry.profile_detect``)
dropped among the result files are not results: they are stashed with the others, marked
``profile`` and not parsed here; ``arrival_services`` attaches them to the run saved with them.

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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from django.conf import settings

from accelboard.importers import ParsedRun, parse_files
from accelboard.importers.profile_registry import profile_detect

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


def submission_read(files: list[tuple[int, str, bytes | None]], too_large: str = "") -> SubmissionRead:
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
    read = submission_read([(index, name, data) for index, (name, data) in enumerate(files)], too_large)
    token = upload_stash(user_id=user_id, files=[(name, data or b"") for name, data in files])
    return token, read


def run_raw_files(run: RunRead, files: Mapping[int, tuple[str, bytes]]) -> tuple[str, bytes]:
    """The raw file a run keeps: its one file (or archive) as uploaded, or a .tar.gz of its files
    (the same bytes for the same files, so a retried upload is recognised)."""
    members = [files[index] for index in run.files]
    if len(members) == 1:
        return members[0]
    return f"{PurePosixPath(members[0][0]).name}-and-{len(members) - 1}-more.tar.gz", files_tar(members)


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
