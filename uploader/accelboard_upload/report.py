"""The comparison an upload answered with, as Markdown: for a CI job's summary page
(``$GITHUB_STEP_SUMMARY``), a pull-request comment and a check run's output.

Pure: the server's answer (``POST /api/v1/runs``: runs, each with its metrics against their
series' baselines and the detector's verdicts) in, text out. Verdicts are the server's, never
re-judged here: ``regression``, ``improvement``, ``none`` (within the noise) and ``new`` (no
history yet).

The comment carries a hidden marker (``marker(key)``) so that a later push finds it and edits it
in place: one comment per pull request and key, never a second one.
"""

from __future__ import annotations

import math
from typing import Any

CHANGES = ("regression", "improvement")
_VERDICT_TEXT = {
    "regression": "🔴 regression",
    "improvement": "🟢 improvement",
    "none": "within noise",
    "new": "new (no baseline)",
}


def marker(key: str) -> str:
    """The hidden line a comment is found again by (one comment per pull request and key)."""
    return f"<!-- accelboard-report:{key} -->"


def counts(runs: list[dict[str, Any]]) -> dict[str, int]:
    """How many metrics got each verdict, over every run."""
    found: dict[str, int] = {}
    for run in runs:
        for metric in run.get("metrics", []):
            found[metric["verdict"]] = found.get(metric["verdict"], 0) + 1
    return found


def headline(runs: list[dict[str, Any]]) -> str:
    """``2 regressions, 1 improvement in 3 runs`` or ``no change in 1 run``."""
    found = counts(runs)
    parts = [
        f"{found[verdict]} {verdict}{'s' if found[verdict] != 1 else ''}"
        for verdict in CHANGES
        if found.get(verdict)
    ]
    where = f"{len(runs)} run{'s' if len(runs) != 1 else ''}"
    return f"{', '.join(parts) if parts else 'no change'} in {where}"


def _cell(text: Any) -> str:
    """A table cell: pipes escaped and line breaks flattened (a file name may carry either)."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _number(value: Any) -> str:
    """Six significant digits with thousands separators, never e-notation; ``-`` for none."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _cell(value)
    if isinstance(value, int):
        return f"{value:,}"
    if value == 0:
        return "0"
    if abs(value) >= 1e6:  # a count of tokens or bytes: whole, not 1.23457e+06
        return f"{round(value):,}"
    text = f"{value:,.6g}"
    if "e" in text:  # below 0.0001: written out, not 1.23e-05
        decimals = -math.floor(math.log10(abs(value))) + 5
        text = f"{value:.{decimals}f}".rstrip("0").rstrip(".")
    return text


def run_section(run: dict[str, Any], *, server: str) -> str:
    """One run: what it is, a link to it, and its metrics against their baselines."""
    url = f"{server.rstrip('/')}{run['url']}" if run.get("url") else ""
    count = run.get("accelerator_count")
    hardware = f"{count}× {run['accelerator']}" if run.get("accelerator") else "no accelerator"
    state = "already uploaded" if run.get("duplicate") else "stored"
    title = f"[run {run['id']}]({url})" if url else f"run {run['id']}"
    lines = [
        f"**{_cell(run.get('file', ''))}** · {_cell(run.get('source_format', ''))} · "
        f"{_cell(run.get('model', ''))} {_cell(run.get('variant', ''))} · {_cell(hardware)} · "
        f"{state} as {title}",
        "",
        "| Metric | Value | Unit | Baseline | Δ % | Verdict |",
        "|---|---:|---|---:|---:|---|",
    ]
    for metric in sorted(run.get("metrics", []), key=lambda m: (m["verdict"] not in CHANGES, m["name"])):
        delta = metric.get("delta_pct")
        lines.append(
            "| "
            + " | ".join(
                (
                    _cell(metric["name"]),
                    _number(metric.get("value")),
                    _cell(metric.get("unit") or ""),
                    _number(metric.get("baseline")),
                    "-" if delta is None else f"{delta:+.1f}",
                    _VERDICT_TEXT.get(metric["verdict"], _cell(metric["verdict"])),
                )
            )
            + " |"
        )
    return "\n".join(lines)


def markdown(runs: list[dict[str, Any]], *, server: str, commit: str = "", key: str | None = None) -> str:
    """The whole report; with ``key`` it starts with the comment's hidden marker."""
    found = counts(runs)
    icon = "❌" if found.get("regression") else "✅"
    parts = [marker(key)] if key is not None else []
    parts.append(f"### {icon} accelboard: {headline(runs)}")
    if commit:
        parts.append(f"Commit `{_cell(commit[:12])}` against each metric's baseline on the server.")
    parts.extend(run_section(run, server=server) for run in runs)
    parts.append(
        "<sub>Verdicts are the regression detector's (accelboard): a change needs evidence beyond "
        "the series' noise; a lone result without repeated samples waits for a second one.</sub>"
    )
    return "\n\n".join(parts) + "\n"
