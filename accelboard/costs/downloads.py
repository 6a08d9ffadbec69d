"""Export tables as a download: one table as CSV, one or all as XLSX (the cost and plan pages).

The HTTP side of ``exports``: a table name that is not on the page, or a CSV asked for without
one, is a 400 naming the ``table`` parameter.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.http import HttpResponse

from . import exports


def tables_download(tables: Sequence[exports.ExportTable], *, fmt: str, name: str, stem: str) -> HttpResponse:
    """``fmt`` "csv" or "xlsx"; ``name`` one table's name, or "" for every table (XLSX only)."""
    by_name = {table.name: table for table in tables}
    if name and name not in by_name:
        return _refused(f"table: unknown table {name!r}; one of {', '.join(by_name)}")
    if fmt == "csv":
        if not name:
            return _refused(
                f"table: a CSV holds one table; add table=one of {', '.join(by_name)} (or format=xlsx for all)"
            )
        body, content_type, filename = (
            exports.table_csv(table=by_name[name]),
            exports.CSV_CONTENT_TYPE,
            f"{stem}-{name}.csv",
        )
    else:
        chosen = [by_name[name]] if name else list(tables)
        body, content_type = exports.tables_xlsx(tables=chosen), exports.XLSX_CONTENT_TYPE
        filename = f"{stem}-{name or 'all'}.xlsx"
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _refused(message: str) -> HttpResponse:
    return HttpResponse(message, status=400, content_type="text/plain; charset=utf-8")
