"""What an importer reads: one file's bytes with its path, and the tree of files around it.

A result can arrive as one file on disk, as bytes (an upload), as a directory or as an archive
(.zip, .tar, .tar.gz/.tgz, .tar.bz2, .tar.xz) of a directory. MLPerf in particular needs the
tree: the system, model and scenario are only in the path, and hardware and precision sit in
sibling files. ``DiskTree`` reads any path on disk (so a results folder given alone still finds its
``systems/`` JSON two levels up); ``MemoryTree`` holds an archive's or an upload's files.
"""

from __future__ import annotations

import abc
import io
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

# Archives are read into memory: refuse what would not fit comfortably (zip bombs included).
MAX_ARCHIVE_BYTES = 1024 * 1024 * 1024
MAX_ARCHIVE_MEMBERS = 20000


@dataclass(frozen=True)
class InputFile:
    """One file: ``path`` is absolute for files on disk, archive-relative for archive members."""

    path: PurePosixPath
    data: bytes

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def display(self) -> str:
        return str(self.path)

    def text(self) -> str:
        try:
            return self.data.decode("utf-8-sig")
        except UnicodeDecodeError:
            # Old logs written on Windows; latin-1 never fails and keeps the digits intact.
            return self.data.decode("latin-1")

    def head(self, size: int = 65536) -> bytes:
        return self.data[:size]


class Tree(abc.ABC):
    """Files by path. Subclasses say how to list and read them."""

    @abc.abstractmethod
    def files(self) -> list[PurePosixPath]:
        raise NotImplementedError

    @abc.abstractmethod
    def read(self, path: PurePosixPath) -> bytes | None:
        raise NotImplementedError

    @abc.abstractmethod
    def listdir(self, path: PurePosixPath) -> list[PurePosixPath]:
        raise NotImplementedError

    def open(self, path: PurePosixPath) -> InputFile | None:
        data = self.read(path)
        return None if data is None else InputFile(path, data)


class DiskTree(Tree):
    def __init__(self, root: Path):
        self.root = root.resolve()

    def files(self) -> list[PurePosixPath]:
        if self.root.is_file():
            return [PurePosixPath(self.root.as_posix())]
        return sorted(PurePosixPath(p.as_posix()) for p in self.root.rglob("*") if p.is_file())

    def read(self, path: PurePosixPath) -> bytes | None:
        target = Path(str(path))
        try:
            return target.read_bytes() if target.is_file() else None
        except OSError:
            return None

    def listdir(self, path: PurePosixPath) -> list[PurePosixPath]:
        target = Path(str(path))
        if not target.is_dir():
            return []
        return sorted(PurePosixPath(p.as_posix()) for p in target.iterdir())


class MemoryTree(Tree):
    def __init__(self, files: dict[PurePosixPath, bytes]):
        self._files = dict(files)

    def files(self) -> list[PurePosixPath]:
        return sorted(self._files)

    def read(self, path: PurePosixPath) -> bytes | None:
        return self._files.get(PurePosixPath(path))

    def listdir(self, path: PurePosixPath) -> list[PurePosixPath]:
        path = PurePosixPath(path)
        children = {p.relative_to(path).parts[0] for p in self._files if path in p.parents}
        return sorted(path / child for child in children)


def is_archive(data: bytes) -> bool:
    if data[:4] == b"PK\x03\x04":
        return True
    if data[:2] == b"\x1f\x8b" or data[:3] == b"BZh" or data[:6] == b"\xfd7zXZ\x00":
        return True  # compressed: a tarball (a lone compressed log is not supported)
    return len(data) > 262 and data[257:262] == b"ustar"


def _safe_member(name: str) -> PurePosixPath | None:
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts or not path.parts:
        return None
    # macOS resource forks and hidden files are never results
    if any(part.startswith("._") or part == "__MACOSX" for part in path.parts):
        return None
    return path


def archive_tree(data: bytes, *, name: str) -> MemoryTree:
    """Read an archive into memory; raises ValueError naming the archive when it is unreadable."""
    files: dict[PurePosixPath, bytes] = {}
    total = 0

    def add(member_name: str, content: bytes) -> None:
        nonlocal total
        path = _safe_member(member_name)
        if path is None:
            return
        total += len(content)
        if total > MAX_ARCHIVE_BYTES or len(files) >= MAX_ARCHIVE_MEMBERS:
            raise ValueError(f"{name}: archive too large (over {MAX_ARCHIVE_BYTES} bytes or members)")
        files[path] = content

    try:
        if data[:4] == b"PK\x03\x04":
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                for info in archive.infolist():
                    if not info.is_dir():
                        if info.file_size > MAX_ARCHIVE_BYTES:
                            raise ValueError(f"{name}: member {info.filename} too large")
                        add(info.filename, archive.read(info))
        else:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
                for member in archive:
                    if member.isfile():
                        extracted = archive.extractfile(member)
                        if extracted is not None:
                            add(member.name, extracted.read())
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as exc:
        raise ValueError(f"{name}: unreadable or truncated archive ({exc})") from exc
    return MemoryTree(files)
