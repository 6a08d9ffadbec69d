"""Archives are refused on the sizes they declare, before anything is unpacked: an archive bomb
costs the server next to no memory. Limits are scaled down here so the bombs are small."""

from __future__ import annotations

import gzip
import io
import lzma
import tarfile
import tracemalloc
import zipfile
from collections.abc import Callable

import pytest

from accelboard.importers import ParseError, inputs, parse_bytes, parse_files

MIB = 1024 * 1024


@pytest.fixture(autouse=True)
def _small_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inputs, "MAX_ARCHIVE_BYTES", 4 * MIB)


def _zip(members: dict[str, int]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, size in members.items():
            archive.writestr(name, bytes(size))
    return out.getvalue()


def _tar(
    members: dict[str, int], compress: Callable[[bytes], bytes] = lambda b: lzma.compress(b, preset=0)
) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        for name, size in members.items():
            info = tarfile.TarInfo(name)
            info.size = size
            archive.addfile(info, io.BytesIO(bytes(size)))
    return compress(out.getvalue())


def _peak_while(call: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        with pytest.raises((ValueError, ParseError)) as raised:
            call()
        assert "too large" in str(raised.value)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    "make",
    [
        lambda: _zip({"a/mlperf_log_detail.txt": 3 * MIB, "b/mlperf_log_detail.txt": 3 * MIB}),
        lambda: _tar({"a/mlperf_log_detail.txt": 3 * MIB, "b/mlperf_log_detail.txt": 3 * MIB}),
        lambda: _tar({"results.json": 16 * MIB}),
        lambda: _tar({"results.json": 16 * MIB}, compress=lambda b: b),  # plain tar
        lambda: _zip({"results.json": 16 * MIB}),
    ],
    ids=["zip-two-members", "tar.xz-two-members", "tar.xz-one-member", "tar-one-member", "zip-one-member"],
)
def test_an_archive_bomb_is_refused_before_anything_is_unpacked(make: Callable[[], bytes]) -> None:
    data = make()
    peak = _peak_while(lambda: inputs.archive_tree(data, name="bomb"))
    # The compressed bytes are already in memory; unpacking would add megabytes.
    assert peak < len(data) + MIB, peak  # decompression buffers, not the members (3-16 MiB)


def test_an_upload_of_a_bomb_is_a_parse_error_naming_it() -> None:
    data = _zip({"a.txt": 3 * MIB, "b.txt": 3 * MIB})
    with pytest.raises(ParseError) as raised:
        parse_bytes(data, filename="results.zip")
    assert "results.zip" in str(raised.value) and "too large" in str(raised.value)


def test_too_many_members_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inputs, "MAX_ARCHIVE_MEMBERS", 10)
    with pytest.raises(ValueError, match="too large"):
        inputs.archive_tree(_zip({f"f{i}.txt": 1 for i in range(11)}), name="many")


def test_an_archive_within_the_limit_is_read_whole() -> None:
    tree = inputs.archive_tree(_tar({"run/a.txt": MIB, "run/b.txt": 2 * MIB}), name="ok")
    assert {str(p): len(tree.read(p) or b"") for p in tree.files()} == {
        "run/a.txt": MIB,
        "run/b.txt": 2 * MIB,
    }
    tree = inputs.archive_tree(_zip({"run/a.txt": MIB}), name="ok")
    assert [len(tree.read(p) or b"") for p in tree.files()] == [MIB]


# --- One member at a time (issue 34, finding 2) ----------------------------------------------------


class _Counted:
    """How many bytes the archive readers were asked for, and the largest single request."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.total = 0
        self.largest = 0
        for cls in (zipfile.ZipExtFile, tarfile.ExFileObject):
            monkeypatch.setattr(cls, "read", self._wrap(cls.read))

    def _wrap(self, read: Callable[..., bytes]) -> Callable[..., bytes]:
        def counted(stream: object, size: int = -1) -> bytes:
            data = read(stream, size)
            self.total += len(data)
            self.largest = max(self.largest, len(data) if size is None or size < 0 else size)
            return data

        return counted


@pytest.mark.parametrize(
    "make",
    [
        lambda: _zip({"run/small.txt": 100, "run/mlperf_log_detail.txt": 3 * MIB}),
        lambda: _tar({"run/small.txt": 100, "run/mlperf_log_detail.txt": 3 * MIB}),
        lambda: _tar({"run/small.txt": 100, "run/mlperf_log_detail.txt": 3 * MIB}, compress=lambda b: b),
    ],
    ids=["zip", "tar.xz", "tar"],
)
def test_a_member_over_the_member_limit_is_refused_naming_it_before_it_is_inflated(
    make: Callable[[], bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within the archive's limit (4 MiB here), over the one-member limit (2 MiB here): refused on
    its declared size, naming the member and the limit, with nothing of any member read."""
    monkeypatch.setattr(inputs, "MAX_MEMBER_BYTES", 2 * MIB, raising=False)
    data = make()
    counted = _Counted(monkeypatch)
    with pytest.raises(ParseError) as raised:
        parse_bytes(data, filename="results.zip")
    message = str(raised.value)
    assert "run/mlperf_log_detail.txt" in message and "2 MiB" in message, message
    assert counted.total == 0


def test_members_are_inflated_a_chunk_at_a_time_and_kept_on_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unpacking asks the archive for at most one chunk at a time, and the unpacked members are
    not held in memory: the tree reads one back when it is asked for it."""
    data = _zip({"run/a.txt": 3 * MIB // 2, "run/b.txt": 3 * MIB // 2, "run/c.txt": 10})
    counted = _Counted(monkeypatch)
    tracemalloc.start()
    try:
        tree = inputs.archive_tree(data, name="ok")
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert counted.total == 3 * MIB + 10
    assert 0 < counted.largest <= inputs._CHUNK
    assert held < MIB // 2, held  # the 3 MiB unpacked are on disk, not here
    assert peak < 3 * MIB, peak  # one chunk at a time (and zlib's window), never a whole member
    assert {str(p): len(tree.read(p) or b"") for p in tree.files()} == {
        "run/a.txt": 3 * MIB // 2,
        "run/b.txt": 3 * MIB // 2,
        "run/c.txt": 10,
    }
    assert tree.read(inputs.PurePosixPath("run/b.txt")) == bytes(3 * MIB // 2)
    assert tree.listdir(inputs.PurePosixPath("run")) == [
        inputs.PurePosixPath("run/a.txt"),
        inputs.PurePosixPath("run/b.txt"),
        inputs.PurePosixPath("run/c.txt"),
    ]


def test_a_tarball_is_unpacked_in_one_streaming_pass_after_its_headers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = _tar({"run/a.txt": MIB, "run/b.txt": 2 * MIB}, compress=lambda b: gzip.compress(b, 1))
    counted = _Counted(monkeypatch)
    tree = inputs.archive_tree(data, name="ok.tar.gz")
    assert counted.total == 3 * MIB and 0 < counted.largest <= inputs._CHUNK
    assert [len(tree.read(p) or b"") for p in tree.files()] == [MIB, 2 * MIB]


def test_a_file_too_costly_to_read_is_refused_naming_it_before_any_importer_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """300 KB of 3-byte lines is ~20 MB once split into lines: the estimate (200 bytes a line)
    refuses it at a 10 MB limit before an importer has its text; the other file is still read."""
    monkeypatch.setattr(inputs, "MAX_PARSE_BYTES", 10_000_000, raising=False)
    texts: list[str] = []
    text = inputs.InputFile.text
    monkeypatch.setattr(inputs.InputFile, "text", lambda file: texts.append(file.display) or text(file))
    ok = (inputs.Path(__file__).parent / "fixtures" / "vllm_2025.json").read_bytes()
    result = parse_files([("lines/mlperf_log_detail.txt", b"ab\n" * 100_000), ("vllm_2025.json", ok)])
    refused = [error for error in result.errors if error.file == "lines/mlperf_log_detail.txt"]
    assert refused and "too large to read" in str(refused[0]) and "10 MB" in str(refused[0]), result.errors
    assert "lines/mlperf_log_detail.txt" not in texts
    assert len(result.runs) == 1 and result.runs[0].source_format == "vllm-serving"
    assert inputs.parse_cost(b"ab\n" * 100_000) > 10_000_000 > inputs.parse_cost(ok)
