"""Archives are refused on the sizes they declare, before anything is unpacked: an archive bomb
costs the server next to no memory. Limits are scaled down here so the bombs are small."""

from __future__ import annotations

import io
import lzma
import tarfile
import tracemalloc
import zipfile
from collections.abc import Callable

import pytest

from accelboard.importers import ParseError, inputs, parse_bytes

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
