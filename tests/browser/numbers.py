"""The number checks of ``tests/numbers.py``, read from a page as Chromium renders it.

``page_number_problems(page, where=...)`` reads the page once (text outside code and raw file
excerpts, every table, every Plotly figure as drawn, the cards' ``data-total`` values and the
``data-change`` elements) and returns the problems in words. ``console_problems`` reads what
Plotly (or anything else) logged as a warning or an error while the page loaded.
``export_problems`` fetches each CSV/XLSX a page offers and checks its totals against the page's.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from tests import numbers

# Text shown to a reader: main's text nodes outside scripts, code, preformatted text and elements
# marked data-raw (a value as the uploaded file wrote it is shown as written, on purpose).
READ_JS = """() => {
  const root = document.querySelector('main') || document.body;
  const skip = 'script, style, code, pre, [data-raw], template, noscript';
  const parts = [];
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode;
    const el = node.parentElement;
    if (!el || el.closest(skip)) continue;
    if (el.closest('.js-plotly-plot')) continue;  // charts are read from their data below
    const text = node.data.trim();
    if (text) parts.push(text);
  }
  const cellText = c => c.closest('[data-raw]') || c.querySelector('[data-raw]') ? '' : c.innerText.trim();
  const tables = [...root.querySelectorAll('table')].filter(t => !t.closest('[data-raw]')).map((t, i) => {
    const head = t.tHead ? [...t.tHead.rows].pop() : null;
    const body = [...t.tBodies].flatMap(b => [...b.rows]);
    return {
      name: t.dataset.table || t.id || (t.closest('[id]') || {}).id || `table ${i + 1}`,
      headers: head ? [...head.cells].map(c => c.innerText.trim().replace(/\\s+/g, ' ')) : [],
      rows: body.map(r => [...r.cells].map(cellText)),
      foot: t.tFoot ? [...t.tFoot.rows].map(r => [...r.cells].map(c => c.innerText.trim())) : [],
      sums: t.tFoot ? [...t.tFoot.rows].map(r => [...r.cells].map(c => c.hasAttribute('data-sum'))) : [],
      rows_differ: t.hasAttribute('data-rows-differ'),
      per_value: head ? [...head.cells].map(c => c.dataset.precision === 'value') : [],
    };
  });
  const figures = [...document.querySelectorAll('.js-plotly-plot, .plot[data-figure]')].map(el => ({
    id: el.id,
    drawn: el.classList.contains('js-plotly-plot'),
    // Traces as Plotly drew them (_fullData: typed arrays decoded), the fields the checks read.
    data: (el._fullData || []).map(t => {
      const keep = {};
      ['type', 'name', 'visible', 'meta', 'branchvalues', 'orientation', 'x', 'y', 'z', 'values', 'labels', 'ids', 'parents'].forEach(k => {
        const v = t[k];
        if (v === undefined) return;
        keep[k] = ArrayBuffer.isView(v) ? Array.from(v) : (Array.isArray(v) ? Array.from(v, x => ArrayBuffer.isView(x) ? Array.from(x) : x) : v);
      });
      return JSON.parse(JSON.stringify(keep));
    }),
    layout: el.layout ? JSON.parse(JSON.stringify(el.layout)) : {},
  }));
  const totals = {};
  document.querySelectorAll('[data-total]').forEach(el => { totals[el.dataset.total] = parseFloat(el.dataset.value); });
  const changes = [...document.querySelectorAll('[data-change]')].map(el => ({
    text: el.innerText.trim(),
    window: el.dataset.window || '',
    'days-now': el.dataset.daysNow, 'covered-now': el.dataset.coveredNow,
    'days-before': el.dataset.daysBefore, 'covered-before': el.dataset.coveredBefore,
  }));
  return {text: parts.join(' | '), tables, figures, totals, changes};
}"""

# Figures may carry typed arrays ({dtype, bdata}): READ_JS reads the traces Plotly drew
# (``_fullData``), where they are decoded, not the figure as handed over.


def page_read(page: Any) -> dict[str, Any]:
    return page.evaluate(READ_JS)


def page_number_problems(
    page: Any, *, where: str, read: dict[str, Any] | None = None, expect_data: bool = True
) -> list[str]:
    """Every number check of ``tests/numbers.py`` on the page as it is now (``expect_data``
    False for a caller with nothing to see, whose charts are rightly empty)."""
    read = read or page_read(page)
    found = numbers.text_problems(read["text"], where=where)
    found += numbers.live_problems(read["text"], where=where)
    for table in read["tables"]:
        found += numbers.table_problems(table, where=where)
    for figure in read["figures"]:
        if not figure["drawn"]:
            found.append(f"{where}: chart #{figure['id']} not drawn by Plotly")
            continue
        found += numbers.figure_problems(figure, where=where, totals=read["totals"], expect_data=expect_data)
    for change in read["changes"]:
        found += numbers.change_problems(change, where=where)
    return found


def console_listen(page: Any) -> list[str]:
    """Start keeping the page's console warnings and errors; returns the list they go to."""
    messages: list[str] = []

    def keep(message: Any) -> None:
        if message.type not in ("warning", "error", "trace", "assert"):
            return
        messages.append(f"{message.type}: {message.text.strip()[:300]}")

    page.on("console", keep)
    return messages


def console_problems(messages: list[str], *, where: str) -> list[str]:
    return [f"{where}: console {message}" for message in messages]


def _csv_rows(body: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(body.decode("utf-8-sig"))))


def _xlsx_sheets(body: bytes) -> dict[str, list[list[Any]]]:
    from openpyxl import load_workbook

    book = load_workbook(io.BytesIO(body))
    return {sheet.title: [list(row) for row in sheet.iter_rows(values_only=True)] for sheet in book}


def export_problems(page: Any, *, where: str, read: dict[str, Any] | None = None) -> list[str]:
    """Each CSV and XLSX a page offers per table (``a[data-download]``), against the page.

    For a table with a totals row, each summed column of the CSV adds up to the page's total, and
    the XLSX sheet ends with the same totals. Every link must download (200, the right type).
    """
    read = read or page_read(page)
    links = page.eval_on_selector_all(
        "a[data-download]", "els => els.map(e => [e.dataset.download, e.getAttribute('href')])"
    )
    tables = {table["name"]: table for table in read["tables"]}
    found: list[str] = []
    for name, href in links:
        response = page.request.get(page.url.split("?")[0] + href if href.startswith("?") else href)
        if response.status != 200:
            found.append(f"{where}: export {name} answered {response.status}")
            continue
        fmt, _, table_name = name.partition("-")
        table = tables.get(table_name)
        page_totals = _page_totals(table) if table else {}
        if fmt == "csv":
            rows = _csv_rows(response.body())
            if not rows:
                found.append(f"{where}: export {name} is empty")
                continue
            header, data = rows[0], rows[1:]
            found += numbers.export_total_problems(
                header=header, rows=data, page_totals=page_totals, where=f"{where} {name}"
            )
            for row in data:
                for cell in row:
                    if numbers.E_NOTATION.fullmatch(cell.strip()):
                        found.append(f"{where} {name}: e-notation {cell!r} in the CSV")
        elif fmt == "xlsx":
            sheets = _xlsx_sheets(response.body())
            if table_name and table_name in sheets:
                rows = sheets[table_name]
                header, data = [str(h) for h in rows[0]], rows[1:]
                if page_totals:
                    if not data or str(data[-1][0]).lower() != "total":
                        found.append(f"{where} {name}: no totals row in the XLSX")
                    else:
                        totals_row = data[-1]
                        found += numbers.export_total_problems(
                            header=header, rows=data[:-1], page_totals=page_totals, where=f"{where} {name}"
                        )
                        for label, (shown, decimals) in page_totals.items():
                            if label in header:
                                value = totals_row[header.index(label)]
                                close = isinstance(value, int | float) and numbers.rounds_to(
                                    value, shown, decimals
                                )
                                if not close:
                                    found.append(
                                        f"{where} {name}: XLSX totals row {label!r} is {value!r}, page {shown}"
                                    )
    return found


def _page_totals(table: dict[str, Any]) -> dict[str, tuple[float, int]]:
    """Column label -> (the total a table's totals row shows, its decimals), for its cells
    marked data-sum."""
    totals: dict[str, tuple[float, int]] = {}
    for foot, sums in zip(table.get("foot") or [], table.get("sums") or [], strict=False):
        for index, (cell, is_sum) in enumerate(zip(foot, sums, strict=False)):
            value = numbers.parse_number(cell) if is_sum else None
            if value is not None and index < len(table["headers"]):
                totals[table["headers"][index]] = (value, numbers.decimals_of(cell))
    return totals
