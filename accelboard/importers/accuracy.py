"""One scale for every accuracy figure: proportions as 0-1 ratios, everything else as the tool's score.

Tools disagree on the scale of the same kind of figure: lm-evaluation-harness and MLPerf Training
write accuracy as a fraction (0.7542), the MLPerf Inference checkers as a percentage (top-1
``75.942%``, ROUGE ``44.563``, SQuAD F1 ``90.54``). A series must not mix the two, so:

1. A **proportion** (accuracy, exact match, F1, ROUGE, mAP, AUC, DICE, WER) is stored as a ratio in
   [0, 1], unit ``ratio``; a percentage is divided by 100. The value as written stays in ``raw``.
2. Anything else (perplexity, eval loss, FID, CLIP score, BLEU as sacrebleu writes it) keeps the
   tool's own number, unit ``score``.
3. Which scale a tool writes is known per tool and per key (the tables of each importer); a value
   written with ``%`` is a percentage. A ratio outside [0, 1] after scaling means the table is
   wrong for this file: the raw value is kept as a score, with a warning, rather than stored
   silently 100 times off.
"""

from __future__ import annotations

from dataclasses import dataclass

PERCENT = "percent"
FRACTION = "fraction"
SCORE = "score"


@dataclass(frozen=True)
class Scaled:
    value: float
    unit: str  # "ratio" or "score"
    raw_unit: str  # "%", "ratio" or "score": how the file wrote it
    warning: str = ""


def scaled(value: float, kind: str, *, what: str) -> Scaled:
    """``scaled(75.942, PERCENT, what="accuracy")`` -> Scaled(0.75942, "ratio", "%")."""
    if kind == SCORE:
        return Scaled(value, "score", "score")
    ratio = value / 100.0 if kind == PERCENT else value
    if -1e-9 <= ratio <= 1.0 + 1e-9:
        return Scaled(min(max(ratio, 0.0), 1.0), "ratio", "%" if kind == PERCENT else "ratio")
    written = f"{value:g}{'%' if kind == PERCENT else ''}"
    return Scaled(
        value,
        "score",
        "score",
        warning=f"{what}: {written} is not a proportion on the expected scale; kept as a score",
    )
