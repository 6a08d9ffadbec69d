"""What the profile pages say where a figure is unknown or rounds away: no timeline reads
"unknown" (never a 0 or a dash taken for one), a share that is not nothing never reads 0.0% (nor
one short of all 100.0%), and a time cut short of all of it never reads -100.0%."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from accelboard.profiles.services import profile_attach
from accelboard.profiles.templatetags.profile_format import pct, pct_change
from tests import factories

from .test_nsys_import import KERN_SUM


@pytest.mark.parametrize(
    ("share", "text"),
    [
        (0.0, "0.0%"),
        (0.0002, "0.02%"),
        (0.0004, "0.04%"),
        (0.5, "50.0%"),
        (0.9997, "99.97%"),
        (1.0, "100.0%"),
    ],
)
def test_a_share_that_is_not_nothing_never_reads_zero(share: float, text: str) -> None:
    assert pct(share) == text


@pytest.mark.parametrize(
    ("change", "text"),
    [(0.0, "0.0%"), (0.01, "+0.01%"), (-0.02, "-0.02%"), (12.345, "+12.3%"), (-99.96, "-99.96%"),
     (-100.0, "-100.0%"), (250.0, "+250.0%"), (-1e-7, ">-0.0001%"), (-100 + 1e-7, "-99.9999%"), (None, "—")],
)  # fmt: skip
def test_a_change_reads_signed_and_never_rounds_to_all_or_nothing(change: float | None, text: str) -> None:
    assert pct_change(change) == text


def test_a_summed_report_says_unknown_where_it_has_no_timeline(
    team: Any, engineer: Any, login_client: Any
) -> None:
    run = factories.run_create(team=team)
    profile_attach(run=run, files=[("run_cuda_gpu_kern_sum.csv", KERN_SUM.encode())])
    page = login_client(engineer).get(reverse("profiles:run_profile", args=[run.pk])).content.decode()
    idle = page[page.index('data-group="idle"') :]
    idle = idle[: idle.index("</div>")]
    assert "<strong>unknown</strong>" in idle and "no timeline in this format" in idle
    compute = page[page.index('data-group="compute"') :]
    assert "of summed busy time" in compute[: compute.index("</div>")]
    short = page[page.index("Short kernels") :]
    short = short[: short.index("</div>")]
    assert "<strong>unknown</strong>" in short and "(summed: no per-kernel durations)" in short
    assert "Share of busy time" in page
    assert 'id="hta-steps"' not in page  # no steps: no empty "Per step" box
