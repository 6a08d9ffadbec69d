"""The number checks (``tests/numbers.py``) catch each kind of defect the pages had, and pass what
pages should write. No database, no browser."""

from __future__ import annotations

from tests import numbers


def test_it_finds_unreadable_numbers_in_page_text() -> None:
    bad = {
        "0.830808 USD": "significant decimals",
        "Energy 1.2e-05 J": "e-notation",
        "73233.09340000003": "float noise",
        "Peak memory 76,339,878,590 bytes": "bytes shown raw",
        "Llama-3.1-8B · Offline 1 runs": "a plural after one",
        "Would need 1 GPUs.": "a plural after one",
        # The issue's own examples (#33, class 13), as the pages wrote them.
        "GPU price 6.3927 USD/h": "significant digits past two decimals",
        "Energy per request 30.3262 J": "significant digits past two decimals",
        "Before 76,403,379,358 ± 123,338,559 bytes": "a level of bytes shown raw",
        "After 1234567.5 ± 812 B": "a level of bytes shown raw",
        "p-value 0.0000006948 significant": "many leading zeros",
        "Welch's t test, p = 0.00012": "many leading zeros",
    }
    for text, kind in bad.items():
        found = numbers.text_problems(text)
        assert any(kind in problem for problem in found), (text, found)


def test_it_passes_numbers_as_pages_should_write_them() -> None:
    text = (
        "Spend 1,401.50 USD | 0.001902 USD per 1M | +3.2 % | 71.1 GiB | Llama-3.1-8B | "
        "driver 550.54.15 / CUDA 12.4 | p99 | sm90_xmma_gemm | commit 3b0193b95d80 | 2026-12-01 02:36 UTC | "
        "1 run | 11 runs | 0.1 days | 21 GPUs | 6.39 USD/h | 6.393 | 30.3 J | 4,890.12 tok/s | "
        "47,139.74 USD | 19,056.6 | 0.7087 | 71.2 GiB ± 118 MiB | p-value < 0.001 | p = 0.012 | 0.000012 USD"
    )
    assert numbers.text_problems(text) == []


def test_it_finds_a_column_mixing_units_or_formats_and_a_wrong_total() -> None:
    table = {
        "name": "t",
        "headers": ["Hardware", "Memory", "Cost per 1M", "Spend"],
        "rows": [
            ["H100", "5.2 GiB", "0.0312", "10.00"],
            ["L4", "812 MiB", "0.001902", "20.00"],
        ],
        "foot": [["Total", "", "", "31.00"]],
        "sums": [[False, False, False, True]],
    }
    found = " ".join(numbers.table_problems(table))
    assert "'Memory' mixes units" in found
    assert "'Cost per 1M' mixes number formats" in found
    assert "'Spend' shows '31.00' but its rows sum to 30" in found


def test_it_passes_a_table_with_one_format_per_column_and_a_right_total() -> None:
    table = {
        "headers": ["Team", "Spend (USD)", "Change"],
        "rows": [["A", "1,234.50", "+1.0 %"], ["B", "0.25", "−3.5 %"], ["C", "—", "—"]],
        "foot": [["Total", "1,234.75", "+0.9 %"]],
        "sums": [[False, True, False]],
    }
    assert numbers.table_problems(table) == []
    # A run's metrics: each row its own quantity and unit column; formats may differ by row.
    metrics = {
        "headers": ["Metric", "Value"],
        "rows": [["p99", "30,764.6"], ["acc", "0.7087"]],
        "rows_differ": True,
    }
    assert numbers.table_problems(metrics) == []


def test_it_finds_a_treemap_plotly_refuses_and_a_chart_that_does_not_add_up() -> None:
    treemap = {
        "id": "treemap",
        "data": [
            {
                "type": "treemap",
                "branchvalues": "total",
                "ids": ["Vision", "Vision/H100", "Vision/L4"],
                "parents": ["", "Vision", "Vision"],
                "values": [99.35, 50.18, 49.18],
            }
        ],
        "layout": {"meta": {"sums_to": "spend"}},
    }
    found = " ".join(numbers.figure_problems(treemap, totals={"spend": 99.35}))
    assert "children sum to" in found
    bars = {
        "id": "spend",
        "data": [{"type": "bar", "y": [1.0, 2.0]}],
        "layout": {"meta": {"sums_to": "spend"}},
    }
    assert "adds up to 3.00, but 'spend' shows 4.00" in " ".join(
        numbers.figure_problems(bars, totals={"spend": 4.0})
    )
    assert numbers.figure_problems(bars, totals={"spend": 3.0}) == []
    empty = {
        "id": "e",
        "data": [{"type": "scatter", "y": []}],
        "layout": {"yaxis": {"title": {"text": "Memory (bytes)"}}},
    }
    found = " ".join(numbers.figure_problems(empty))
    assert "no trace with data" in found and "raw bytes" in found


def test_it_finds_a_change_between_periods_of_unequal_coverage() -> None:
    # December's one day of data against a whole November: the −98.2% of the finding.
    change = {
        "text": "−98.2 %",
        "window": "Dec 1 vs Nov 1–30",
        "days-now": "1",
        "covered-now": "1",
        "days-before": "30",
        "covered-before": "30",
    }
    assert numbers.change_problems(change) == []  # equal (full) coverage of what it names...
    partial = {**change, "days-now": "31", "covered-now": "1"}
    assert "compares 1 of 31 days" in " ".join(numbers.change_problems(partial))  # ...this is not
    assert "does not say which periods" in " ".join(numbers.change_problems({**change, "window": ""}))
    # No figure shown (the element says why): nothing to check.
    assert numbers.change_problems({**partial, "text": "no change shown"}) == []


def test_it_finds_an_export_whose_column_does_not_sum_to_the_page_total() -> None:
    header = ["Day (UTC)", "Grouped by", "Group", "Spend (USD)"]
    rows = [["2026-11-01", "team", "A", "100.0"], ["2026-11-01", "provider", "aws", "100.0"]]
    found = numbers.export_total_problems(header=header, rows=rows, page_totals={"Spend (USD)": (100.0, 2)})
    assert "sums to 200.0000 in the export" in " ".join(found)
    assert (
        numbers.export_total_problems(header=header, rows=rows[:1], page_totals={"Spend (USD)": (100.0, 2)})
        == []
    )


def test_it_takes_a_value_half_a_digit_away_as_rounded_but_not_more() -> None:
    # The demo's idle GPU-hours in CI: the XLSX total 65.35, the page 65.4 (float error made the
    # difference 0.0500000000000043).
    assert numbers.rounds_to(65.35, 65.4, 1)
    assert numbers.rounds_to(65.35, 65.3, 1)
    assert numbers.rounds_to(1234.5649, 1234.56, 2)
    assert not numbers.rounds_to(65.2999, 65.4, 1)
    assert not numbers.rounds_to(1234.566, 1234.56, 2)


def test_it_allows_an_exports_rows_their_own_rounding_but_not_more() -> None:
    # The demo's idle GPU-hours in CI: four rows of 4 places sum to 92.8500; their unrounded sum
    # (92.84996...) is what the page rounded to 92.8.
    header = ["Host", "GPU-hours idle (h)"]
    rows = [["a", "23.2125"], ["b", "23.2125"], ["c", "23.2125"], ["d", "23.2125"]]
    totals = {"GPU-hours idle (h)": (92.8, 1)}
    assert numbers.export_total_problems(header=header, rows=rows, page_totals=totals) == []
    # Integers are exact: a count one off is found; so is a 4-place total a digit past its rows' slack.
    counts = numbers.export_total_problems(header=["n"], rows=[[3], [4]], page_totals={"n": (8.0, 0)})
    assert "sums to 7.0000" in " ".join(counts)
    rows[0][1] = "23.2130"
    assert numbers.export_total_problems(header=header, rows=rows, page_totals=totals)


def test_it_finds_a_level_line_that_does_not_hold_the_results_it_spans() -> None:
    xs = [f"2026-10-{day:02d}" for day in range(1, 9)]
    ys = [10.0, 10.0, 10.0, 10.0, 8.0, 8.0, 8.0, 8.0]
    points = {"x": xs, "y": ys, "meta": {"role": "series"}}

    def line(role: str, x0: int, x1: int, y: float) -> dict:
        return {"x": [xs[x0], xs[x1]], "y": [y, y], "meta": {"role": role, "level": True}}

    right = {"data": [points, line("baseline-level", 0, 3, 10.0), line("current-level", 4, 7, 8.0)]}
    assert numbers.figure_problems(right) == []
    # A baseline stretched over the whole chart at the old level, or one that followed the
    # regression: neither is the median of what it spans.
    across = {"data": [points, line("before", 0, 7, 10.0)]}
    (problem,) = numbers.figure_problems(across)
    assert "median of the results it spans is 9" in problem
    followed = {"data": [points, line("baseline-level", 4, 7, 8.0), line("current-level", 4, 7, 8.0)]}
    (problem,) = numbers.figure_problems(followed)
    assert "baseline runs over the regressed level" in problem
    off = {"data": [points, line("after", 4, 7, 8.0) | {"x": [xs[4], "2026-11-01"]}]}
    (problem,) = numbers.figure_problems(off)
    assert "not from a result of its series to another" in problem


def test_it_finds_live_figures_that_do_not_say_how_fresh() -> None:
    # The overview said "9 GPUs now · of 85 reporting" with stale hosts among them.
    for text in (
        "0.2% of GPU-time throttled · 9 GPUs now of 85 GPUs reporting",
        "Hosts · GPUs 15 · 85 | 2 | of | 80 | GPUs reporting now",
        "3 hosts live",
    ):
        assert any("how fresh" in p for p in numbers.live_problems(text)), text


def test_it_passes_live_figures_that_say_how_fresh() -> None:
    for text in (
        "1 of 4 GPUs reporting now (as of 14:05 UTC)",
        "12 hosts and 80 GPUs reporting in the last 5 min; 3 stale",
        "2 | of | 4 | GPUs reporting throttled now (as of 14:05 UTC)",
        "of 85 GPUs that reported in the last 24 h",  # not a live figure: a window of a day
        "Alert #3 is now acknowledged",
    ):
        assert numbers.live_problems(text) == [], text


# --- named parts -------------------------------------------------------------------------------


def test_it_finds_a_total_that_is_not_the_sum_of_its_named_parts() -> None:
    header = ["Team", "Spend (USD)", "Capacity (USD)", "Energy cost (USD)", "Spend on a stale price (USD)"]
    good = [["A", "4,799.36", "4,740.00", "59.36", "50.00"], ["B", "—", "—", "—", "—"]]
    assert numbers.parts_problems(header=header, rows=good) == []
    # The energy of an unpriced day counted in the part and not in the whole.
    bad = [["A", "4,799.36", "4,740.00", "61.36", "50.00"]]
    assert numbers.parts_problems(header=header, rows=bad, where="by_team") == [
        "by_team: row 1 'Spend (USD)' is '4,799.36' but Capacity (USD) + Energy cost (USD) is 4,801.3600"
    ]
    # Busy counted as utilisation-weighted hours is not a part of the hours held.
    hours = ["Host", "GPU-hours held (h)", "GPU-hours busy (h)", "GPU-hours idle (h)"]
    assert numbers.parts_problems(header=hours, rows=[["a", 192.0, 144.0, 48.0]]) == []
    assert len(numbers.parts_problems(header=hours, rows=[["a", 192.0, 70.0, 48.0]])) == 1
    # A table without every part (a serving table: no busy, no idle) is not checked.
    assert (
        numbers.parts_problems(header=["GPU-hours held (h)", "GPU-hours idle (h)"], rows=[[1.0, 9.0]]) == []
    )


def test_it_finds_breakdowns_of_one_report_that_add_up_to_different_totals() -> None:
    totals = {
        "by_team": {"GPU-hours held": 51693.0, "Spend on a stale price": 26.0},
        "by_model": {"GPU-hours held": 51693.004, "Spend on a stale price": 0.0},
        "daily": {"GPU-hours held": None},
    }
    assert numbers.same_totals_problems(totals, where="report") == [
        "report: 'Spend on a stale price' differs between breakdowns: by_team 26.00, by_model 0.00"
    ]


def test_it_finds_a_p_value_column_written_to_many_leading_zeros() -> None:
    table = {
        "headers": ["Metric", "p-value"],
        "rows": [["p99", "0.0000006948 significant"], ["mean", "0.35"]],
        "rows_differ": True,
    }
    found = " ".join(numbers.table_problems(table))
    assert "'p-value': p-value '0.0000006948 significant'" in found
    table["rows"] = [["p99", "< 0.001 significant"], ["mean", "0.35"]]
    assert numbers.table_problems(table) == []


def test_it_finds_a_chart_format_that_writes_e_notation_or_long_decimals() -> None:
    def figure(template: str, tickformat: str = ",.0f") -> dict:
        return {
            "id": "c",
            "data": [{"type": "scatter", "y": [1.0, 2.0], "hovertemplate": template}],
            "layout": {"yaxis": {"tickformat": tickformat}},
        }

    # What the trends, run and alert charts wrote (#33): ".4g" shows 7.64e+10 for bytes.
    assert "e-notation" in " ".join(numbers.figure_problems(figure("%{y:,.4g} W<extra></extra>")))
    assert "e-notation" in " ".join(numbers.figure_problems(figure("%{y:,.3f} ms")))
    assert numbers.figure_problems(figure("%{y:,.3f} ms", tickformat="")) != []
    assert numbers.figure_problems(figure("%{x|%Y-%m-%d}<br>%{y:,.4~r} W", tickformat=",.2f")) == []
    assert numbers.figure_problems(figure("%{y:.2f}% loss", tickformat=",~r")) == []


def test_it_lets_a_column_written_value_by_value_mix_decimals_but_not_units() -> None:
    table = {
        "headers": ["Run", "Energy"],
        "rows": [["a", "0.0066"], ["b", "112.9"]],
        "per_value": [False, True],
    }
    assert numbers.table_problems(table) == []
    table["rows"] = [["a", "0.0066 J"], ["b", "112.9 kJ"]]
    assert "mixes units" in " ".join(numbers.table_problems(table))
    table["per_value"] = []
    assert "mixes number formats" in " ".join(
        numbers.table_problems({**table, "rows": [["a", "0.0066"], ["b", "112.9"]]})
    )
