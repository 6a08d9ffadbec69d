"""Importers of benchmark-tool output: pure functions from files to accelboard's run schema.

No ORM and no Django here: the upload page, the API and ``accelboard parse`` all call
``parse_path`` / ``parse_bytes`` (one file, a directory, an archive) or ``parse_files`` /
``parse_paths`` (files given together: one submission, grouped as a directory would be) and
decide themselves what to store. One module per format
(``FORMATS`` lists them), detected by content (``detect``); shared unit handling in ``units``.
"""

from __future__ import annotations

from .base import (
    AccuracyResult,
    Hardware,
    Metric,
    ParsedRun,
    ParseError,
    TelemetryRow,
    UnrecognisedFormat,
    Variant,
    Workload,
)
from .registry import (
    FORMATS,
    ContextError,
    Submission,
    context_apply,
    detect,
    normalise_context,
    parse_bytes,
    parse_files,
    parse_path,
    parse_paths,
)

__all__ = [
    "context_apply",
    "FORMATS",
    "AccuracyResult",
    "ContextError",
    "Hardware",
    "Metric",
    "ParseError",
    "ParsedRun",
    "TelemetryRow",
    "UnrecognisedFormat",
    "Variant",
    "Workload",
    "detect",
    "normalise_context",
    "parse_bytes",
    "parse_files",
    "parse_path",
    "parse_paths",
    "Submission",
]
