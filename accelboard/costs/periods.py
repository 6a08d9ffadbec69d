"""Comparing two periods of costs like with like (pure: dates and numbers in, no Django).

A change between two periods is only meaningful when both hold the same kind of days:

1. **Complete days only.** Today is still running: its partial spend would read as a drop.
2. **The same days.** A month is compared with the same days of the month before (December 1-5
   against November 1-5), a week with the week before it. When the earlier period is shorter
   (March 1-31 against the 28 days of February) the comparison is of **spend per day**.
3. **Equal coverage.** Both periods must have data on the same share of their days (every day of
   both, or as many days of each when they are equally long); a fleet that started (or stopped
   reporting) inside one of them would read as growth (or a drop) that is not there. Then no
   change is shown, and the page says why.

``Comparison`` holds the two windows (end exclusive), names them (``label``) and computes the
change of daily rates (``change_pct``), or None where rule 3 fails.
"""

from __future__ import annotations

import calendar
import datetime as dt
from dataclasses import dataclass
from decimal import Decimal


def _short(day: dt.date) -> str:
    return f"{day:%b} {day.day}"


def span_label(start: dt.date, end: dt.date) -> str:
    """``Nov 1–30``, ``Nov 28–Dec 4``, ``Dec 1``: a window [start, end) in words."""
    last = end - dt.timedelta(days=1)
    if last == start:
        return _short(start)
    if (last.year, last.month) == (start.year, start.month):
        return f"{_short(start)}–{last.day}"
    return f"{_short(start)}–{_short(last)}"


@dataclass(frozen=True)
class Comparison:
    """Two windows of whole days, [now_start, now_end) against [before_start, before_end)."""

    now_start: dt.date
    now_end: dt.date
    before_start: dt.date
    before_end: dt.date

    @property
    def days_now(self) -> int:
        return (self.now_end - self.now_start).days

    @property
    def days_before(self) -> int:
        return (self.before_end - self.before_start).days

    @property
    def per_day(self) -> bool:
        """Whether the windows differ in length, so that daily rates are compared."""
        return self.days_now != self.days_before

    @property
    def now_label(self) -> str:
        return span_label(self.now_start, self.now_end)

    @property
    def before_label(self) -> str:
        return span_label(self.before_start, self.before_end)

    @property
    def label(self) -> str:
        """What is compared, in words: ``Dec 1–5 vs Nov 1–5`` (``per day`` when lengths differ)."""
        text = (
            f"{span_label(self.now_start, self.now_end)} vs {span_label(self.before_start, self.before_end)}"
        )
        return f"{text}, per day" if self.per_day else text

    def in_now(self, day: dt.date) -> bool:
        return self.now_start <= day < self.now_end

    def in_before(self, day: dt.date) -> bool:
        return self.before_start <= day < self.before_end

    def covered(self, *, covered_now: int, covered_before: int) -> bool:
        """Rule 3: data on the same share of both windows' days (and on at least one)."""
        return covered_now > 0 and covered_now * self.days_before == covered_before * self.days_now

    def change_pct(
        self,
        *,
        now: Decimal | float | None,
        before: Decimal | float | None,
        covered_now: int,
        covered_before: int,
    ) -> float | None:
        """The change of the daily rate, in percent; None unless both windows are equally covered
        and the earlier one is not zero."""
        if (
            now is None
            or before is None
            or not self.covered(covered_now=covered_now, covered_before=covered_before)
        ):
            return None
        rate_before = float(before) / self.days_before
        if rate_before == 0:
            return None
        return (float(now) / self.days_now - rate_before) / rate_before * 100.0


def month_comparison(*, month: dt.date, today: dt.date) -> Comparison | None:
    """The complete days of ``month`` so far against the same days of the month before (all of
    it when this month has more days than that one). None before the month's first complete day."""
    start = month.replace(day=1)
    end = start + dt.timedelta(days=calendar.monthrange(start.year, start.month)[1])
    done = (min(end, today) - start).days
    if done <= 0:
        return None
    before_start = (start - dt.timedelta(days=1)).replace(day=1)
    before_days = calendar.monthrange(before_start.year, before_start.month)[1]
    return Comparison(
        now_start=start,
        now_end=start + dt.timedelta(days=done),
        before_start=before_start,
        before_end=before_start + dt.timedelta(days=min(done, before_days)),
    )


def trailing_comparison(*, today: dt.date, days: int) -> Comparison:
    """The ``days`` complete days before today against the ``days`` before them."""
    end = today
    start = end - dt.timedelta(days=days)
    return Comparison(
        now_start=start, now_end=end, before_start=start - dt.timedelta(days=days), before_end=start
    )
