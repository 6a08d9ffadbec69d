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
import lzma
import tarfile
import tempfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from .base import ParseError

# Archives are unpacked to a temporary file (``SpooledTree``), not to memory: the limit on the
# whole is for the disk and the time (zip bombs included). Four times the API's 64 MiB body limit:
# text results compress 5-20x, a bomb 1,000x.
MAX_ARCHIVE_BYTES = 256 * 1024 * 1024
MAX_ARCHIVE_MEMBERS = 20000
# One member is read whole by an importer (bytes, text, lines or JSON objects: 4-10 times its
# size in memory), so one member is limited to what keeps a request under ~300 MB.
MAX_MEMBER_BYTES = 32 * 1024 * 1024
# What reading one file of an upload or an archive whole may cost in memory, estimated from its
# content before any importer sees it (``parse_cost``): its bytes and its text, then per line (a
# str split off, a CSV row's list and tuple) and per comma or opening bracket (a JSON value or CSV
# field: one object and its pointer). Short lines and tiny values are what make a few MiB of text
# cost gigabytes (``ab\n`` repeated: 3 bytes of text, ~200 bytes once a row).
MAX_PARSE_BYTES = 160 * 1000 * 1000
_LINE_COST = 200
_VALUE_COST = 64


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


def parse_cost(data: bytes) -> int:
    """A bound on the memory an importer needs to read ``data`` whole (see ``MAX_PARSE_BYTES``)."""
    values = data.count(b",") + data.count(b"[") + data.count(b"{")
    return 2 * len(data) + _LINE_COST * data.count(b"\n") + _VALUE_COST * values


def check_cost(display: str, data: bytes) -> bytes:
    """``data``, or ParseError naming the file when reading it whole would cost more than
    ``MAX_PARSE_BYTES`` of memory (and it is refused before any importer reads it)."""
    if len(data) > MAX_MEMBER_BYTES:
        raise ParseError(
            display,
            f"file too large: {len(data) / 1048576:,.1f} MiB; one result file may hold at most "
            f"{MAX_MEMBER_BYTES // 1048576} MiB",
        )
    cost = parse_cost(data)
    if cost > MAX_PARSE_BYTES:
        raise ParseError(
            display,
            f"file too large to read: its lines and values would take ~{cost / 1e6:,.0f} MB of memory, "
            f"at most {MAX_PARSE_BYTES / 1e6:,.0f} MB; split it",
        )
    return data


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

    def peek(self, path: PurePosixPath) -> bytes | None:
        """Read a file only to see whether it is the one wanted (not counted as used by a run)."""
        return self.read(path)


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
    """Files held in memory (an upload's). ``checked``: each read is refused when reading the
    file whole would cost more than ``MAX_PARSE_BYTES`` (a server's upload; the command line's
    files on disk are not limited)."""

    def __init__(self, files: dict[PurePosixPath, bytes], *, checked: bool = True):
        self._files = dict(files)
        self._checked = checked

    def files(self) -> list[PurePosixPath]:
        return sorted(self._files)

    def read(self, path: PurePosixPath) -> bytes | None:
        data = self._files.get(PurePosixPath(path))
        return data if data is None or not self._checked else check_cost(str(path), data)

    def listdir(self, path: PurePosixPath) -> list[PurePosixPath]:
        path = PurePosixPath(path)
        children = {p.relative_to(path).parts[0] for p in self._files if path in p.parents}
        return sorted(path / child for child in children)


class FileSetTree(Tree):
    """The files given together (an upload's files, the paths on a command line): ``files()`` lists
    only them, so that grouping never pulls in a stranger from the same folder. Reads of other
    paths (an MLPerf ``systems/`` JSON two levels up) go to ``fallback`` when there is one."""

    def __init__(
        self, files: dict[PurePosixPath, bytes], fallback: Tree | None = None, *, checked: bool = True
    ):
        self._given = MemoryTree(files, checked=checked)
        self._fallback = fallback

    def files(self) -> list[PurePosixPath]:
        return self._given.files()

    def read(self, path: PurePosixPath) -> bytes | None:
        data = self._given.read(path)
        if data is None and self._fallback is not None:
            data = self._fallback.read(path)
        return data

    def listdir(self, path: PurePosixPath) -> list[PurePosixPath]:
        listed = set(self._given.listdir(path))
        if self._fallback is not None:
            listed.update(self._fallback.listdir(path))
        return sorted(listed)


class RecordingTree(Tree):
    """A tree that remembers which files were read through it: a run lists the files it used."""

    def __init__(self, tree: Tree):
        self._tree = tree
        self.read_paths: list[PurePosixPath] = []

    def files(self) -> list[PurePosixPath]:
        return self._tree.files()

    def read(self, path: PurePosixPath) -> bytes | None:
        data = self._tree.read(path)
        if data is not None and path not in self.read_paths:
            self.read_paths.append(PurePosixPath(path))
        return data

    def listdir(self, path: PurePosixPath) -> list[PurePosixPath]:
        return self._tree.listdir(path)

    def peek(self, path: PurePosixPath) -> bytes | None:
        return self._tree.peek(path)


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


def archive_tree(data: bytes, *, name: str) -> Tree:
    """Unpack an archive to a temporary file on disk; raises ValueError naming the archive when it
    is unreadable or would unpack to more than ``MAX_ARCHIVE_BYTES`` (or ``MAX_ARCHIVE_MEMBERS``
    files), and naming the member when one member would unpack to more than ``MAX_MEMBER_BYTES``.

    Archive bombs (a 1 MiB zip of a 1 GiB member of zeros) are refused before any member is
    unpacked: the sizes the archive declares are added up first (a zip's central directory; a
    tarball's headers, read in one pass that keeps nothing), then members are inflated
    ``_CHUNK`` bytes at a time against running totals, so an archive that understates a size is
    stopped at the limit too. Memory holds one chunk while unpacking, and one member (read back
    from the file) while an importer reads it."""
    try:
        if data[:4] == b"PK\x03\x04":
            return _zip_members(data, name)
        return _tar_members(data, name)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError) as exc:
        raise ValueError(f"{name}: unreadable or truncated archive ({exc})") from exc


def _too_large(name: str) -> ValueError:
    return ValueError(
        f"{name}: archive too large: it unpacks to more than {MAX_ARCHIVE_BYTES // (1024 * 1024)} MiB "
        f"or {MAX_ARCHIVE_MEMBERS:,} files"
    )


def _member_too_large(name: str, member: PurePosixPath) -> ValueError:
    return ValueError(
        f"{name}: archive member {str(member)!r} too large: it unpacks to more than "
        f"{MAX_MEMBER_BYTES // (1024 * 1024)} MiB (the most one file of a result may hold)"
    )


class SpooledTree(Tree):
    """An archive's members, unpacked into one anonymous temporary file (gone once closed or
    collected): only the index of where each member lies is in memory, and a read returns one
    member."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._file = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the tree
        self._index: dict[PurePosixPath, tuple[int, int]] = {}
        self._end = 0

    def files(self) -> list[PurePosixPath]:
        return sorted(self._index)

    def read(self, path: PurePosixPath) -> bytes | None:
        where = self._index.get(PurePosixPath(path))
        if where is None:
            return None
        self._file.seek(where[0])
        return check_cost(str(path), self._file.read(where[1]))

    def listdir(self, path: PurePosixPath) -> list[PurePosixPath]:
        path = PurePosixPath(path)
        children = {p.relative_to(path).parts[0] for p in self._index if path in p.parents}
        return sorted(path / child for child in children)

    def close(self) -> None:
        self._file.close()

    def add(self, path: PurePosixPath, stream: IO[bytes], budget: _Budget) -> None:
        """Copy a member from ``stream`` to the file ``_CHUNK`` bytes at a time, refused as soon as
        it passes ``MAX_MEMBER_BYTES`` or the archive passes ``MAX_ARCHIVE_BYTES``."""
        self._file.seek(self._end)
        size = 0
        while chunk := stream.read(_CHUNK):
            size += len(chunk)
            if size > MAX_MEMBER_BYTES:
                raise _member_too_large(self.name, path)
            budget.count(len(chunk))
            self._file.write(chunk)
        self._index[path] = (self._end, size)
        self._end += size


class _Budget:
    """What an archive may still unpack: declared sizes first, then the bytes actually read."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.declared = 0
        self.members = 0
        self.read = 0

    def declare(self, size: int, path: PurePosixPath) -> None:
        if size > MAX_MEMBER_BYTES:
            raise _member_too_large(self.name, path)
        self.declared += max(size, 0)
        self.members += 1
        if self.declared > MAX_ARCHIVE_BYTES or self.members > MAX_ARCHIVE_MEMBERS:
            raise _too_large(self.name)

    def count(self, size: int) -> None:
        self.read += size
        if self.read > MAX_ARCHIVE_BYTES:
            raise _too_large(self.name)


# What one read of a member inflates at most: the most memory unpacking holds at once.
_CHUNK = 1024 * 1024


def _zip_members(data: bytes, name: str) -> SpooledTree:
    budget = _Budget(name)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        wanted = [
            (info, path)
            for info in archive.infolist()
            if not info.is_dir() and (path := _safe_member(info.filename))
        ]
        for info, path in wanted:
            budget.declare(info.file_size, path)
        tree = SpooledTree(name)
        try:
            for info, path in wanted:
                with archive.open(info) as member:
                    tree.add(path, member, budget)
        except BaseException:
            tree.close()
            raise
    return tree


def _tar_members(data: bytes, name: str) -> SpooledTree:
    budget = _Budget(name)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
        for member in archive:  # headers only: the data between them is skipped, not kept
            path = _safe_member(member.name) if member.isfile() else None
            if path is not None:
                budget.declare(member.size, path)
    tree = SpooledTree(name)
    try:
        # The second pass streams (``r|*``): each member is inflated once, in order, and nothing
        # of it stays in the tarfile's buffers.
        with tarfile.open(fileobj=io.BytesIO(data), mode="r|*") as archive:
            for member in archive:
                path = _safe_member(member.name) if member.isfile() else None
                extracted = archive.extractfile(member) if path is not None else None
                if path is not None and extracted is not None:
                    tree.add(path, extracted, budget)
    except BaseException:
        tree.close()
        raise
    return tree
