"""Files saved inside ``transaction_with_files`` go with its rows: deleted on a rollback."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage

from accelboard.core.services import stored_file_track, transaction_with_files

pytestmark = pytest.mark.django_db


def _save(storage: FileSystemStorage, name: str) -> str:
    saved = storage.save(name, ContentFile(b"x"))
    stored_file_track(storage=storage, name=saved)
    return saved


def test_a_rollback_deletes_the_files_of_the_block_and_of_blocks_inside_it(tmp_path: Path) -> None:
    storage = FileSystemStorage(location=tmp_path)
    with pytest.raises(RuntimeError), transaction_with_files():
        _save(storage, "outer.txt")
        with transaction_with_files():
            _save(storage, "inner.txt")  # committed inside, handed to the outer block
        raise RuntimeError("refused")
    assert list(tmp_path.iterdir()) == []


def test_an_inner_rollback_caught_by_the_caller_keeps_the_outer_files(tmp_path: Path) -> None:
    storage = FileSystemStorage(location=tmp_path)
    with transaction_with_files():
        _save(storage, "kept.txt")
        with pytest.raises(ValueError), transaction_with_files():
            _save(storage, "dropped.txt")
            raise ValueError("this file only")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.txt"]


def test_outside_a_block_tracking_does_nothing(tmp_path: Path) -> None:
    storage = FileSystemStorage(location=tmp_path)
    _save(storage, "plain.txt")
    assert [p.name for p in tmp_path.iterdir()] == ["plain.txt"]
