"""The incremental check replayed run by run over a whole history (bench/detection.py and the
detector's tests): what the server does as each result of a series arrives."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from accelboard.alerts.detection import NONE, Verdict, check_latest


def replay(
    values: Sequence[float] | np.ndarray,
    *,
    direction: str,
    start: int = 0,
    **options: float | int,
) -> list[Verdict]:
    """Run ``check_latest`` as each result arrives, accepting every flagged change as the new baseline.

    What the server does run by run, for re-scoring a history or benchmarking the incremental
    check. Returns the flagged verdicts in order.
    """
    x = np.asarray(values, dtype=float)
    baseline = start
    flagged: list[Verdict] = []
    for n in range(baseline + 2, len(x) + 1):
        if not math.isfinite(x[n - 1]):
            continue
        verdict = check_latest(x[:n], direction=direction, baseline=baseline, **options)  # type: ignore[arg-type]
        if verdict.kind != NONE and verdict.change_index is not None:
            flagged.append(verdict)
            baseline = verdict.change_index
    return flagged
