"""CSV reading with line numbers, for the CSV formats (CodeCarbon, nvidia-smi)."""

from __future__ import annotations

import csv
import io

from .base import ParseError
from .inputs import InputFile


def rows(file: InputFile, *, skipinitialspace: bool = True) -> list[tuple[int, list[str]]]:
    """(line number, cells) for every non-empty row; a broken quote is a ParseError with its line."""
    reader = csv.reader(io.StringIO(file.text()), skipinitialspace=skipinitialspace, strict=True)
    out = []
    try:
        for cells in reader:
            if cells and any(cell.strip() for cell in cells):
                out.append((reader.line_num, [cell.strip() for cell in cells]))
    except csv.Error as exc:
        raise ParseError(file.display, f"broken CSV ({exc})", line=reader.line_num) from exc
    return out


def first_line(file: InputFile) -> str:
    return file.head(4096).decode("utf-8-sig", "replace").splitlines()[0] if file.data.strip() else ""
