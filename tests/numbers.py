"""Checks that the numbers a page or an export shows are readable and add up.

Pure (text, plain tables and figure JSON in; a list of problems in words out), so the same checks
read a page in Chromium (``tests/browser/numbers.py`` extracts what they need), a CSV or an XLSX.

What is a problem:

1. **Unreadable numbers** in page text: e-notation (``1.2e-05``), float noise
   (``73233.09340000003``), more than four significant decimals (``0.830808``; ``0.001902`` has
   four), past two decimals more than four significant digits in all (``6.3927 USD/h``,
   ``30.3262 J``; money's cents, ``47,139.74``, are two decimals), byte counts shown raw
   (``76,339,878,590 bytes``, ``76,403,379,358 ± 123,338,559 bytes``), and p-values written out
   to many leading zeros (``p 0.0000006948``; ``< 0.001`` says it).
2. **Tables**: a column holding more than one unit (``5.2 GiB`` above ``812 MiB``), or numbers
   written with different decimals (``0.0312`` above ``0.001902``), except in a table whose rows
   are different quantities (``data-rows-differ``: a run's metrics, each with its own unit column,
   where bytes in GiB sit below tokens/s);
   a totals row (``<tfoot>`` cells marked ``data-sum``) that is not the sum of the column.
3. **Charts**: a figure with no trace holding data, an axis titled in raw bytes, a hover text or
   axis format that writes e-notation (d3's ``g``/``e``: ``%{y:,.4g}`` shows ``1.2e-5``) or more
   than two fixed decimals (``%{y:,.3f}``; ``,.4~r`` keeps four significant digits), a treemap whose
   parent is not the sum of its children (Plotly then draws nothing), a chart declared to sum to a
   card (``layout.meta.sums_to``) that does not.
4. **Changes**: a percentage change (``data-change``) between periods not equally covered by
   data (the same share of their days), or whose windows are not named.
5. **Exports**: a column whose sum is not the page's total for it.
6. **Level lines** (a trace whose ``meta.level`` is true, or named as one: ``before: …``,
   ``after: …``, ``baseline median · …``, ``current level median · …``): a line that does not run from one of its series' results to another, or is not drawn
   at the median of the results it spans (``alerts.levels``: a level holds over its segment, and
   only there); a baseline drawn over a regressed level its chart draws apart (``current-level``).
7. **Live figures**: a count of GPUs or hosts said to be "now", "live" or "reporting" with no
   word of how fresh it is ("as of 14:05", "in the last 5 min") beside it.
8. **Named parts**: a total shown beside its parts (spend beside capacity and energy cost,
   GPU-hours held beside busy and idle) that is not their sum, in a row or in the totals; two
   breakdowns of one report whose totals of the same figure differ.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# A number as pages write it: an optional sign, thousands separators or none, optional decimals.
# Not part of a word (``p99``, ``sm90``, a commit hash) nor of a dotted version (``550.54.15``).
NUMBER = re.compile(r"(?<![\w.,\-−])([-+−]?)(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?![\w]|[.,]\d)")
# Not a group of a UUID ("GPU-db25de8f-56e8-446f-..."): a hyphen before it is no minus sign.
E_NOTATION = re.compile(r"(?<![\w.\-])[-+]?\d+(?:\.\d+)?[eE][-+]?\d+(?![\w.\-])")
# A run of zeros or nines after a significant digit: what binary floats leave (0.1 + 0.2).
FLOAT_NOISE = re.compile(r"\d\.0*[1-9]\d*?(?:0{5,}[1-9]|9{5,})")
# "1 runs", "1 GPUs": a count of one with a plural noun (a template without ``pluralize``).
ONE_PLURAL = re.compile(
    r"(?<![\w.,\-−])1 (runs|results|hosts|GPUs|alerts|days|emails|requests|samples|metrics|workloads|"
    r"teams|minutes|hours|weeks|months|instances|jobs|pods|tokens|commits|models|variants|evaluations)\b"
)
RAW_BYTES = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d{4,})\s*(?:bytes|B)\b")
# A level in raw bytes before its spread: "76,403,379,358 ± 123,338,559 bytes" (a million and up).
RAW_BYTES_LEVEL = re.compile(
    r"(?<![\w.,])(?:\d{1,3}(?:,\d{3}){2,}|\d{7,})(?:\.\d+)?\s*±\s*[\d,.]+\s*(?:bytes|B)\b"
)
# A p-value written out past 0.001 ("p 0.0000006948", "p-value: 0.00012", "p = 0.0003").
LONG_P_VALUE = re.compile(r"\bp(?:-value)?\s*[=:]?\s*(0\.000\d+)")
MAX_SIGNIFICANT_DECIMALS = 4
# Past two decimals (money's cents), at most this many significant digits in all.
MAX_SIGNIFICANT_DIGITS = 4
DASHES = {"", "—", "-", "–", "n/a"}


def significant_decimals(decimals: str) -> int:
    """Digits after the point once its leading zeros are dropped: "0012" -> 2, "830808" -> 6."""
    return len(decimals.lstrip("0"))


def significant_digits(whole: str, decimals: str) -> int:
    """Significant digits of a number as written: "30", "3262" -> 6; "0", "001902" -> 4. Zeros
    that pad a column's decimals ("40.9700" beside "0.0680") add none."""
    digits = (whole.replace(",", "") + decimals.rstrip("0")).lstrip("0")
    return len(digits)


def text_problems(text: str, *, where: str = "") -> list[str]:
    """Unreadable numbers in a page's text (rule 1)."""
    found: list[str] = []
    prefix = f"{where}: " if where else ""
    for match in E_NOTATION.finditer(text):
        found.append(f"{prefix}e-notation {match.group(0)!r} in {_around(text, match)!r}")
    for match in FLOAT_NOISE.finditer(text):
        found.append(f"{prefix}float noise {match.group(0)!r} in {_around(text, match)!r}")
    for match in NUMBER.finditer(text):
        decimals = match.group(3) or ""
        if significant_decimals(decimals) > MAX_SIGNIFICANT_DECIMALS:
            found.append(
                f"{prefix}{match.group(0)!r} has more than {MAX_SIGNIFICANT_DECIMALS} significant "
                f"decimals in {_around(text, match)!r}"
            )
        elif len(decimals) > 2 and significant_digits(match.group(2), decimals) > MAX_SIGNIFICANT_DIGITS:
            found.append(
                f"{prefix}{match.group(0)!r} has more than {MAX_SIGNIFICANT_DIGITS} significant "
                f"digits past two decimals in {_around(text, match)!r}"
            )
    for match in RAW_BYTES.finditer(text):
        found.append(f"{prefix}bytes shown raw: {_around(text, match)!r}")
    for match in RAW_BYTES_LEVEL.finditer(text):
        found.append(f"{prefix}a level of bytes shown raw: {_around(text, match)!r}")
    for match in LONG_P_VALUE.finditer(text):
        found.append(f"{prefix}a p-value written to many leading zeros: {_around(text, match)!r}")
    for match in ONE_PLURAL.finditer(text):
        found.append(f"{prefix}a plural after one: {_around(text, match)!r}")
    return sorted(set(found))


# A live figure: "3 GPUs now", "1 of 4 GPUs reporting now", "2 hosts live" (rule 7).
LIVE_FIGURE = re.compile(
    r"(?<![\w.,])\d[\d,]*\s+(?:of\s+\d[\d,]*\s+)?(?:GPUs?|hosts?)\b[^.;]{0,60}?\b(?:now|live|reporting)\b",
    re.IGNORECASE,
)
# How fresh it is: a time it holds as of, or a window it was seen in.
FRESHNESS = re.compile(
    r"\bas of (?:\d{4}-\d{2}-\d{2}[ T])?\d{1,2}:\d{2}|\bin the last \d+(?:-\d+)?\s*(?:s|sec|seconds?|min|minutes?)\b",
    re.IGNORECASE,
)
LIVE_WINDOW = 250


def live_problems(text: str, *, where: str = "") -> list[str]:
    """Live figures that do not say how fresh they are (rule 7): each needs ``FRESHNESS`` within
    ``LIVE_WINDOW`` characters of it. A page's text nodes come " | "-joined (``<b>1</b> of 4
    GPUs`` is three): they are read as one text here."""
    found: list[str] = []
    prefix = f"{where}: " if where else ""
    text = text.replace(" | ", " ")
    for match in LIVE_FIGURE.finditer(text):
        start, end = max(0, match.start() - LIVE_WINDOW), min(len(text), match.end() + LIVE_WINDOW)
        if FRESHNESS.search(text, start, end) is None:
            found.append(f"{prefix}a live figure that does not say how fresh: {_around(text, match)!r}")
    return sorted(set(found))


def _around(text: str, match: re.Match[str], width: int = 30) -> str:
    start, end = max(0, match.start() - width), min(len(text), match.end() + width)
    return " ".join(text[start:end].split())


# --- tables ----------------------------------------------------------------------------------


def parse_number(text: str) -> float | None:
    """The first number of a cell as a float ("1,234.5 USD" -> 1234.5, "−3.0 %" -> -3.0)."""
    match = NUMBER.search(text)
    if match is None:
        return None
    sign, whole, decimals = match.groups()
    value = float(whole.replace(",", "") + (f".{decimals}" if decimals else ""))
    return -value if sign in ("-", "−") else value


# A number cell: the number, then at most a unit ("GiB", "%", "USD", "tokens/s") and a note in
# brackets ("8.5 (11%)"). "1× H100 SXM 80GB" or "2026-11-18 04:00" are labels that hold numbers.
NUMBER_CELL = re.compile(r"[$€£]?\s*" + NUMBER.pattern + r"(?:\s?[^\s\d()]{1,12})?(?:\s\([^()]*\))?")


def _numeric(cell: str) -> re.Match[str] | None:
    """The number of a cell that is a number (possibly with a unit), not a label holding one."""
    cell = cell.strip()
    if NUMBER_CELL.fullmatch(cell) is None:
        return None
    return NUMBER.search(cell)


def _template(cell: str) -> str:
    """The unit of a numeric cell: the cell with its numbers and signs taken out."""
    return NUMBER.sub("#", cell.strip()).replace("+#", "#").replace("−#", "#").strip()


def table_problems(table: Mapping[str, Any], *, where: str = "") -> list[str]:
    """One unit and one number format per column; totals rows that add up (rule 2).

    ``table``: ``{"name", "headers": [str], "rows": [[str]], "foot": [[str]], "sums": [[bool]],
    "rows_differ": bool, "per_value": [bool]}`` (``per_value``: columns written value by value) (``foot``/``sums``: the totals rows and which of their cells are sums).
    """
    found: list[str] = []
    name = table.get("name") or "table"
    headers: list[str] = list(table.get("headers") or [])
    rows: list[list[str]] = [list(row) for row in table.get("rows") or []]
    prefix = f"{where}: {name}"
    width = max((len(row) for row in rows), default=0)
    for index in range(width):
        header = headers[index] if index < len(headers) else f"column {index + 1}"
        cells = [row[index].strip() for row in rows if index < len(row) and row[index].strip() not in DASHES]
        if re.search(r"\bp-value\b", header, re.IGNORECASE):
            # A p-value column: below 0.001 it says "< 0.001" (core.numbers.p_value).
            found += [
                f"{prefix} column {header!r}: p-value {cell!r} written to many leading zeros"
                for cell in cells
                if re.search(r"(?<![\d.])0\.000\d", cell)
            ]
        numeric = [cell for cell in cells if _numeric(cell)]
        if not numeric or len(numeric) < len(cells):
            continue  # a text column, or one mixing text and numbers (labels): nothing to compare
        if table.get("rows_differ"):
            continue  # each row its own quantity, its unit in a column of its own
        per_value = list(table.get("per_value") or [])
        if index < len(per_value) and per_value[index]:
            # A column that says its values are written one by one (``data-precision="value"``:
            # too far apart in size for one format within the rules): one unit still.
            if len({_template(cell) for cell in numeric}) > 1:
                found.append(
                    f"{prefix} column {header!r} mixes units {sorted({_template(c) for c in numeric})}"
                )
            continue
        units = sorted({_template(cell) for cell in numeric})
        if len(units) > 1:
            found.append(f"{prefix} column {header!r} mixes units {units}")
        decimals = sorted({len(_numeric(cell).group(3) or "") for cell in numeric})  # type: ignore[union-attr]
        if len(decimals) > 1:
            sample = ", ".join(numeric[:4])
            found.append(f"{prefix} column {header!r} mixes number formats ({sample}: decimals {decimals})")
    for foot, sums in zip(table.get("foot") or [], table.get("sums") or [], strict=False):
        for index, (cell, is_sum) in enumerate(zip(foot, sums, strict=False)):
            if not is_sum:
                continue
            header = headers[index] if index < len(headers) else f"column {index + 1}"
            total = parse_number(cell)
            values = [parse_number(row[index]) for row in rows if index < len(row)]
            shown = [value for value in values if value is not None]
            if total is None:
                found.append(f"{prefix} totals row: {header!r} is {cell!r}, not a number")
                continue
            tolerance = (
                (len(shown) + 1) * 0.5 * 10 ** -decimals_of_cells([*[row[index] for row in rows], cell])
            )
            if abs(sum(shown) - total) > tolerance + 1e-9:
                found.append(
                    f"{prefix} totals row: {header!r} shows {cell!r} but its rows sum to {sum(shown):,.4f}"
                )
    found += parts_problems(header=headers, rows=[*rows, *(table.get("foot") or [])], where=prefix)
    return found


def decimals_of(cell: str) -> int:
    """Decimals the first number of ``cell`` is written with."""
    match = _numeric(cell)
    return len(match.group(3) or "") if match else 0


def decimals_of_cells(cells: Iterable[str]) -> int:
    """The most decimals any of ``cells`` is written with (what rounding each may carry)."""
    most = 0
    for cell in cells:
        match = _numeric(cell)
        if match:
            most = max(most, len(match.group(3) or ""))
    return most


# --- charts ----------------------------------------------------------------------------------

_VALUE_KEYS = ("y", "z", "values")


def _points(trace: Mapping[str, Any]) -> list[float]:
    # A horizontal bar chart carries its values on x.
    keys = ("x",) if trace.get("orientation") == "h" else _VALUE_KEYS
    for key in keys:
        values = trace.get(key)
        if isinstance(values, Sequence) and not isinstance(values, str) and len(values):
            flat: list[Any] = []
            for value in values:
                flat.extend(value if isinstance(value, list) else [value])
            return [float(v) for v in flat if isinstance(v, int | float) and math.isfinite(v)]
    return []


def figure_total(figure: Mapping[str, Any]) -> float:
    """What a chart adds up to: the roots of a treemap, else every visible trace's values."""
    total = 0.0
    for trace in figure.get("data") or []:
        if trace.get("visible") is False or (trace.get("meta") or {}).get("role") in {"total", "marker"}:
            continue
        if trace.get("type") in ("treemap", "sunburst", "icicle"):
            parents = trace.get("parents") or []
            total += sum(float(v) for v, p in zip(trace.get("values") or [], parents, strict=False) if not p)
        else:
            total += sum(_points(trace))
    return total


def figure_problems(
    figure: Mapping[str, Any],
    *,
    where: str = "",
    totals: Mapping[str, float] | None = None,
    expect_data: bool = True,
) -> list[str]:
    """A chart that draws, in a readable unit, and adds up to what it says it does (rule 3).

    ``figure``: ``{"id", "data": [...], "layout": {...}}`` (Plotly's input). ``totals``: the page's
    ``data-total`` values by key, for charts whose ``layout.meta.sums_to`` names one;
    ``expect_data`` False for a caller who has nothing to see (an empty chart is then right).
    """
    found: list[str] = []
    prefix = f"{where}: chart #{figure.get('id') or '?'}"
    data = [trace for trace in figure.get("data") or [] if trace.get("visible") is not False]
    if expect_data and not any(_points(trace) or trace.get("labels") for trace in data):
        found.append(f"{prefix} has no trace with data")
    layout = figure.get("layout") or {}
    for key, axis in layout.items():
        if not (key.startswith(("xaxis", "yaxis")) and isinstance(axis, Mapping)):
            continue
        title = axis.get("title")
        text = title.get("text", "") if isinstance(title, Mapping) else str(title or "")
        if re.search(r"\bbytes\b|\(B\)", text):
            found.append(f"{prefix} axis {key} is in raw bytes ({text!r})")
    found += _format_problems(figure, prefix)
    for trace in data:
        if trace.get("type") == "treemap" and trace.get("branchvalues") == "total":
            found += _treemap_problems(trace, prefix)
    found += level_problems(data, prefix=prefix)
    meta = layout.get("meta") if isinstance(layout.get("meta"), Mapping) else {}
    sums_to = meta.get("sums_to") if meta else None
    if sums_to:
        card = (totals or {}).get(sums_to)
        if card is None:
            found.append(f"{prefix} sums to {sums_to!r} but the page has no data-total={sums_to!r}")
        else:
            drawn = figure_total(figure)
            points = sum(len(_points(t)) for t in data) or 1
            if abs(drawn - card) > 0.005 * (points + 1) + 1e-9:
                found.append(f"{prefix} adds up to {drawn:,.2f}, but {sums_to!r} shows {card:,.2f}")
    return found


LEVEL_NAME = re.compile(r"^(?:before|after):|^(?:baseline|current level) median\b")


def level_problems(data: Sequence[Mapping[str, Any]], *, prefix: str = "") -> list[str]:
    """Rule 6: each level line against the results of its series (the trace with role ``series``
    and the same ``meta.series``; else the chart's first trace)."""
    found: list[str] = []
    series: dict[Any, Mapping[str, Any]] = {}
    spans: dict[tuple[Any, str], tuple[int, int]] = {}
    for trace in data:
        meta = trace.get("meta") if isinstance(trace.get("meta"), Mapping) else {}
        if meta.get("role") == "series":
            series[meta.get("series", 0)] = trace
    if data and not series:
        series[0] = data[0]
    for trace in data:
        meta = trace.get("meta") if isinstance(trace.get("meta"), Mapping) else {}
        if not (meta.get("level") or LEVEL_NAME.search(str(trace.get("name") or ""))):
            continue
        name = f"{prefix} level line {trace.get('name')!r}"
        source = series.get(meta.get("series", 0))
        if source is None:
            found.append(f"{name} has no series to hold")
            continue
        xs, ys = list(source.get("x") or []), list(source.get("y") or [])
        x0, x1 = (trace.get("x") or [None])[0], (trace.get("x") or [None])[-1]
        if x0 not in xs or x1 not in xs:
            found.append(f"{name} spans {x0}..{x1}, not from a result of its series to another")
            continue
        start, end = xs.index(x0), xs.index(x1)
        spans[(meta.get("series", 0), str(meta.get("role")))] = (start, end)
        held = sorted(
            float(y) for y in ys[start : end + 1] if isinstance(y, int | float) and math.isfinite(y)
        )
        if not held:
            continue
        middle = len(held) // 2
        median = held[middle] if len(held) % 2 else (held[middle - 1] + held[middle]) / 2
        drawn = [float(y) for y in trace.get("y") or []]
        if not drawn or any(not math.isclose(y, median, rel_tol=1e-6, abs_tol=1e-9) for y in drawn):
            found.append(
                f"{name} is drawn at {drawn[:1]}, but the median of the results it spans is {median:g}"
            )
    for (position, role), (start, _) in spans.items():
        if role != "current-level" or (position, "baseline-level") not in spans:
            continue
        if spans[(position, "baseline-level")][1] >= start:
            found.append(
                f"{prefix} series {position}: the baseline runs over the regressed level drawn apart"
            )
    return found


# A d3 number format in a Plotly template ("%{y:,.4g}") or an axis' tickformat.
TEMPLATE_FORMAT = re.compile(r"%\{[^}:|]+:([^}]*)\}")
BAD_FORMAT = re.compile(r"(?:^|[^~])[eg]$|\.([3-9]|\d\d)f$")


def _format_problems(figure: Mapping[str, Any], prefix: str) -> list[str]:
    """Hover texts and axis formats that write numbers against the rules (rule 3)."""
    specs: set[str] = set()

    def walk(node: Any, key: str = "") -> None:
        if isinstance(node, Mapping):
            for k, v in node.items():
                walk(v, str(k))
        elif isinstance(node, list):
            for v in node:
                walk(v, key)
        elif isinstance(node, str):
            if key in ("hovertemplate", "texttemplate"):
                specs.update(TEMPLATE_FORMAT.findall(node))
            elif key in ("tickformat", "hoverformat") and node:
                specs.add(node)

    walk({"data": figure.get("data") or [], "layout": figure.get("layout") or {}})
    return [
        f"{prefix} formats numbers as {spec!r} (e-notation or more than two fixed decimals)"
        for spec in sorted(specs)
        if BAD_FORMAT.search(spec)
    ]


def _treemap_problems(trace: Mapping[str, Any], prefix: str) -> list[str]:
    ids = list(trace.get("ids") or trace.get("labels") or [])
    parents = list(trace.get("parents") or [])
    values = [float(v) for v in trace.get("values") or []]
    children: dict[str, float] = {}
    for parent, value in zip(parents, values, strict=False):
        if parent:
            children[parent] = children.get(parent, 0.0) + value
    found = []
    for node, value in zip(ids, values, strict=False):
        # Plotly refuses (and draws nothing for) a parent below its children's sum, float error aside.
        if node in children and value < children[node] * (1 - 1e-6):
            found.append(
                f"{prefix} treemap node {node!r} is {value!r} but its children sum to {children[node]!r}"
            )
    return found


# --- changes ---------------------------------------------------------------------------------


def change_problems(change: Mapping[str, Any], *, where: str = "") -> list[str]:
    """A percentage change shown only between equally covered windows that it names (rule 4).

    ``change``: the ``data-*`` of an element marked ``data-change``: ``window`` (what is compared,
    in words), ``days-now``/``covered-now`` and ``days-before``/``covered-before`` (days in each
    window and days of them with data), ``text`` (what the element shows).
    """
    prefix = f"{where}: change {change.get('text', '')!r}"
    found = []
    if not change.get("window"):
        found.append(f"{prefix} does not say which periods it compares")
    try:
        now, covered_now = int(change["days-now"]), int(change["covered-now"])
        before, covered_before = int(change["days-before"]), int(change["covered-before"])
    except (KeyError, TypeError, ValueError):
        return [*found, f"{prefix} does not say how much of each period has data"]
    shown = re.search(r"\d\s*%", str(change.get("text", ""))) is not None  # a figure, not "no change shown"
    if shown and covered_now * before != covered_before * now:
        found.append(
            f"{prefix} compares {covered_now} of {now} days with data against {covered_before} of {before}"
        )
    return found


# --- exports ---------------------------------------------------------------------------------


def export_total_problems(
    *,
    header: Sequence[str],
    rows: Sequence[Sequence[Any]],
    page_totals: Mapping[str, tuple[float, int]],
    where: str = "",
) -> list[str]:
    """Each column the page totals sums, in the export, to the page's total (rule 5).

    ``page_totals``: column label -> (the total the page shows, its decimals); ``rows``: the
    export's data rows (its own totals row left out by the caller).
    """
    found = []
    for label, (shown, decimals) in page_totals.items():
        if label not in header:
            found.append(f"{where}: the export has no column {label!r} that the page totals")
            continue
        index = list(header).index(label)
        cells = [row[index] for row in rows if index < len(row)]
        values = [_as_float(cell) for cell in cells]
        total = sum(v for v in values if v is not None)
        # Each exported row is rounded to its own digits: their sum may stand up to half a last
        # digit a row away from the total of the unrounded values, which is what the page rounds
        # (92.84996 shown as 92.8, the rows' 4-place values summing to 92.85004).
        slack = sum(_rounding(cell) for cell, value in zip(cells, values, strict=True) if value is not None)
        if not rounds_to(total, shown, decimals, slack=slack):
            found.append(
                f"{where}: column {label!r} sums to {total:,.4f} in the export, the page shows {shown:,}"
            )
    return found


def rounds_to(value: float, shown: float, decimals: int, *, slack: float = 0.0) -> bool:
    """Whether a page showing ``shown`` to ``decimals`` digits can be showing ``value``.

    The page rounds to the digits it shows, an export keeps every digit; a value exactly half
    a digit away (65.35 shown as 65.4) is within, whatever float error the subtraction adds.
    ``slack``: how far ``value`` may stand from what the page rounded (an export's rows each
    rounded to their own digits).
    """
    return abs(value - shown) <= 0.5 * 10**-decimals + slack + 1e-9


def _rounding(cell: Any) -> float:
    """How far an exported cell may stand from the value it was rounded from: half its last
    digit after the point (an integer, or text without a point, is exact)."""
    if isinstance(cell, bool | int):
        return 0.0
    text = (cell if isinstance(cell, str) else repr(cell)).replace(",", "").strip()
    if "." not in text or "e" in text.lower():
        return 0.0
    return 0.5 * 10 ** -len(text.split(".", 1)[1])


def _as_float(value: Any) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value).replace(",", ""))
    except ValueError:
        return None


# --- named parts -----------------------------------------------------------------------------
# A total beside its named parts is their sum, in every row and in the totals (rule 8): the
# parts are found by their labels, whatever the table (a breakdown, a drill-down, an export).
# whole label prefix -> part label prefixes; "Spend on ..." is a part of spend, not spend.
PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Spend", ("Capacity", "Energy cost")),
    ("GPU-hours held", ("GPU-hours busy", "GPU-hours idle")),
)


def _column(header: Sequence[str], prefix: str) -> int | None:
    """The column whose label is ``prefix`` alone or followed by a unit or a qualifier."""
    for index, label in enumerate(header):
        rest = label[len(prefix) :] if label.startswith(prefix) else None
        if rest is not None and (rest == "" or rest.startswith((" (", ","))):
            return index
    return None


def parts_problems(*, header: Sequence[str], rows: Sequence[Sequence[Any]], where: str = "") -> list[str]:
    """Each whole of ``PARTS`` whose parts are all columns of the table equals their sum, row by
    row (a row with no whole, a gap, is left alone; a missing part counts as zero only beside a
    whole that is there). Cells may be numbers or page text ("4,799.36")."""
    found = []
    for whole, parts in PARTS:
        whole_at = _column(header, whole)
        parts_at = [_column(header, part) for part in parts]
        if whole_at is None or any(index is None for index in parts_at):
            continue
        for number, row in enumerate(rows, start=1):
            total = _cell_value(row[whole_at])
            if total is None:
                continue
            cells = [row[index] for index in parts_at if index is not None]
            summed = sum(value or 0.0 for value in (_cell_value(cell) for cell in cells))
            slack = sum(_rounding(cell) for cell in [row[whole_at], *cells])
            if abs(summed - total) > slack + 1e-6:
                found.append(
                    f"{where}: row {number} {header[whole_at]!r} is {row[whole_at]!r} but "
                    f"{' + '.join(header[index] for index in parts_at if index is not None)} is {summed:,.4f}"
                )
    return found


def _cell_value(cell: Any) -> float | None:
    if isinstance(cell, str):
        return None if cell.strip() in DASHES else parse_number(cell)
    return _as_float(cell)


def same_totals_problems(
    totals: Mapping[str, Mapping[str, float | None]], *, where: str = "", places: int = 2
) -> list[str]:
    """Every breakdown of one report adds up to the same total of each figure it has.

    ``totals``: breakdown name -> figure label -> that breakdown's total (None: it has no column).
    """
    found = []
    labels = sorted({label for figures in totals.values() for label in figures})
    for label in labels:
        seen = {name: value for name, figures in totals.items() if (value := figures.get(label)) is not None}
        if len({round(value, places) for value in seen.values()}) > 1:
            listed = ", ".join(f"{name} {value:,.{places}f}" for name, value in seen.items())
            found.append(f"{where}: {label!r} differs between breakdowns: {listed}")
    return found
