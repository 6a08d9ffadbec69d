"""Uploaded files kept between the upload page's preview and its save.

The preview step parses the files and stores their bytes under ``MEDIA_ROOT/tmp/<token>/``
(one file per upload plus a manifest naming the uploader); the save step reads them back by
token, so the browser never sends the bytes twice and never supplies them a second time
(what is saved is exactly what was previewed). A token belongs to the user who made it. The
directory is removed once every file is saved; abandoned ones are pruned after ``MAX_AGE_S``.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

MAX_AGE_S = 24 * 3600
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{20,64}$")


class UploadExpired(LookupError):
    """The token is unknown, malformed, another user's, or its files were already cleaned up."""


@dataclass(frozen=True)
class StashedFile:
    index: int
    name: str
    data: bytes


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
