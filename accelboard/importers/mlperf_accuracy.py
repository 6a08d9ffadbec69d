"""MLPerf Inference ``accuracy.txt``: the accuracy checker's last figures, on one scale.

1. Each benchmark's checker prints its own text; the figures are on the last dict-like line
   (``{'rouge1': 44.56, ...}``, values sometimes quoted: ``'rouge1': '38.837'``) or the last
   ``key=value`` / ``Key: value`` line (``accuracy=75.942%, good=37971, total=50000``,
   ``Accuracy: mean = 0.86170, kidney = 0.9347``, ``Word Error Rate: 2.06%``) before ``hash=``.
2. Counts that sit beside the figures (``good``, ``total``, ``gen_num``, ``gen_len``,
   ``tokens_per_sample``, ``num-samples``) are context, never accuracy.
3. Scale (``accuracy``): the checkers print proportions as percentages (top-1, mAP, AUC, SQuAD
   F1/EM, ROUGE, GSM8K, MBXP, BLEU, WER), except 3D-UNet's DICE (``mean``, ``kidney``,
   ``tumor``: fractions); FID and CLIP are scores. All proportions are stored as 0-1 ratios. A key
   outside this table is a percentage when written with ``%``, else a score with a warning.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from typing import Any

from . import jsondepth
from .accuracy import FRACTION, PERCENT, SCORE, Scaled, scaled
from .base import ParseError
from .inputs import InputFile
from .units import UnitError, to_float

# lowercase key -> (scale as written, higher is better)
_KEYS: dict[str, tuple[str, bool]] = {
    "accuracy": (PERCENT, True),
    "acc": (PERCENT, True),
    "top1": (PERCENT, True),
    "top-1": (PERCENT, True),
    "map": (PERCENT, True),
    "auc": (PERCENT, True),
    "f1": (PERCENT, True),
    "exact_match": (PERCENT, True),
    "em": (PERCENT, True),
    "rouge1": (PERCENT, True),
    "rouge2": (PERCENT, True),
    "rougel": (PERCENT, True),
    "rougelsum": (PERCENT, True),
    "gsm8k": (PERCENT, True),
    "mbxp": (PERCENT, True),
    "humaneval": (PERCENT, True),
    "bleu": (PERCENT, True),
    "word_error_rate": (PERCENT, False),
    "wer": (PERCENT, False),
    "mean": (FRACTION, True),
    "kidney": (FRACTION, True),
    "tumor": (FRACTION, True),
    "dice": (FRACTION, True),
    "fid_score": (SCORE, False),
    "fid": (SCORE, False),
    "clip_score": (SCORE, True),
    "clip": (SCORE, True),
}
_COUNT = re.compile(r"(^|_)(num|count|len|total|good|samples?|tokens_per_sample)(_|$)|^gen_")
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_PAIR = re.compile(rf"([A-Za-z][\w.\-]*(?: [A-Za-z][\w.\-]*)*)\s*[=:]\s*['\"]?({_NUMBER})\s*(%?)['\"]?")


@dataclass(frozen=True)
class Figure:
    """One accuracy figure as the checker printed it, with its normalised value."""

    key: str
    scaled: Scaled
    higher_is_better: bool
    raw: str


@dataclass
class Accuracy:
    figures: list[Figure]
    counts: dict[str, float]
    warnings: list[str]


def read_accuracy(file: InputFile) -> Accuracy:
    """The checker's figures from the last dict-like or ``key=value`` line before ``hash=``."""
    lines = file.text().splitlines()
    end = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].startswith("hash=")), len(lines))
    for index in range(end - 1, -1, -1):
        text = lines[index].strip()
        if not text:
            continue
        pairs = _pairs(text, file, index + 1)
        if pairs:
            return _classify(pairs)
    raise ParseError(
        file.display, "no accuracy values (a dict or key=value line) before 'hash='", line=end or 1
    )


def _pairs(text: str, file: InputFile, line: int) -> list[tuple[str, str, bool]]:
    """(key, number as written, written with %) for each numeric entry of the line."""
    obj: Any = None
    if text.startswith("{") and text.endswith("}"):
        try:
            obj = jsondepth.loads(text)
        except jsondepth.JsonTooDeep as exc:
            raise ParseError(file.display, exc.reason, line=line) from None
        except json.JSONDecodeError:
            try:
                obj = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                obj = None
    if isinstance(obj, dict):
        out = []
        for key, value in obj.items():
            if isinstance(value, bool) or value is None or isinstance(value, dict | list):
                continue
            written = str(value).strip()
            percent = written.endswith("%")
            try:
                number = to_float(written.removesuffix("%").strip())
            except UnitError as exc:
                if isinstance(value, str):
                    continue  # a label such as 'dataset': 'cnn_dailymail'
                raise ParseError(file.display, f"{key}: {exc}", line=line) from exc
            if number is not None:
                out.append((str(key), written.removesuffix("%").strip(), percent))
        return out
    return [(key.strip(), number, bool(percent)) for key, number, percent in _PAIR.findall(text)]


def _classify(pairs: list[tuple[str, str, bool]]) -> Accuracy:
    figures: list[Figure] = []
    counts: dict[str, float] = {}
    warnings: list[str] = []
    for key, number, percent in pairs:
        value = float(number)
        norm = re.sub(r"[\s\-]+", "_", key.strip().lower())
        known = _KEYS.get(norm)
        if known is None and _COUNT.search(norm):
            counts[key] = value
            continue
        if known is None:
            kind, higher = (PERCENT if percent else SCORE), True
            if not percent:
                warnings.append(f"accuracy {key}={number}: scale unknown to accelboard; kept as a score")
        else:
            kind, higher = known
            if percent:
                kind = PERCENT
        result = scaled(value, kind, what=f"accuracy {key}")
        if result.warning:
            warnings.append(result.warning)
        figures.append(
            Figure(key=key, scaled=result, higher_is_better=higher, raw=number + ("%" if percent else ""))
        )
    return Accuracy(figures=figures, counts=counts, warnings=warnings)
