"""``accelboard parse FILE... [--format NAME] [--context k=v ...]``: print normalised runs as JSON.

Profiler traces (Kineto JSON, nsys stats CSV) among the files are read together as one profile
(one file per rank) and its summary is printed instead: the summary object alone when every file
is a trace, ``{"runs": [...], "profile": {...}}`` when result files come with them. The summary
is the profiles app's analysis, which sits above the importers: the ``accelboard`` entry point
hands it in (``profile_summary``); without it a trace is an error.

For checking a file before uploading it, and for scripts. Needs no server and no database (the
``accelboard`` entry point routes here before Django settings are loaded). Files given together
are one submission (``parse_paths``): an MLPerf run's loose summary, detail log, system and
measurement JSON and accuracy.txt print as one run. Exit 0 when every file parsed, 2 otherwise,
with one error line per failed file on stderr; the runs of the files that did parse are still
printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from .base import ParseError, UnrecognisedFormat
from .profile_data import ProfileData
from .profile_registry import profile_detect, profile_parse
from .registry import FORMATS, ContextError, normalise_context, parse_paths

# What ``accelboard parse`` prints for a profile: ``profiles.analysis.profile_analyse``.
ProfileSummary = Callable[[ProfileData], dict[str, Any]]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="accelboard parse",
        description="Parse benchmark result files (or directories, or archives) and print accelboard runs as JSON.",
    )
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="result file, directory or .zip/.tar.gz archive"
    )
    parser.add_argument(
        "--format", dest="fmt", choices=sorted(FORMATS), help="skip detection and read as this format"
    )
    parser.add_argument(
        "--context",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="what the file lacks: model=, precision=, accelerator=, count=, batch_size=, ... (repeatable)",
    )
    parser.add_argument(
        "--no-samples", action="store_true", help="leave per-request samples and telemetry rows out"
    )
    parser.add_argument("--compact", action="store_true", help="one-line JSON")
    return parser


def main(argv: list[str] | None = None, *, profile_summary: ProfileSummary | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse printed its message; keep the exit code contract (2)
        return 0 if exc.code == 0 else 2
    pairs: dict[str, str] = {}
    for item in args.context:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            print(f"accelboard parse: --context {item!r}: expected KEY=VALUE", file=sys.stderr)
            return 2
        pairs[key.strip()] = value
    try:
        normalise_context(pairs)
    except ContextError as exc:
        print(f"accelboard parse: {exc}", file=sys.stderr)
        return 2
    traces = [name for name in args.files if args.fmt is None and profile_detect(name)]
    others = [name for name in args.files if name not in traces]
    failed = 0
    profile: dict[str, Any] | None = None
    if traces:
        profile = _profile(traces, profile_summary)
        failed += profile is None
    results: list[dict[str, Any]] = []
    if others:
        try:
            submission = parse_paths(others, fmt=args.fmt, context=pairs)
        except ContextError as exc:
            print(f"accelboard parse: {exc}", file=sys.stderr)
            return 2
        for error in submission.errors:
            print(f"accelboard parse: {error}", file=sys.stderr)
        failed += len(submission.errors)
        for run in submission.runs:
            data = run.to_dict()
            if args.no_samples:
                for metric in data["metrics"]:
                    metric["samples"] = []
                data.pop("telemetry", None)
            results.append(data)
    output: Any = results
    if traces:
        output = profile if not others else {"runs": results, "profile": profile}
    json.dump(output, sys.stdout, indent=None if args.compact else 2, ensure_ascii=False)
    sys.stdout.write("\n")
    return 2 if failed else 0


def _profile(names: list[str], summary: ProfileSummary | None) -> dict[str, Any] | None:
    """The summary of the traces given, or None (the error printed) when one cannot be read."""
    if summary is None:
        print(
            f"accelboard parse: {names[0]}: a profiler trace; run `accelboard parse` to summarise it",
            file=sys.stderr,
        )
        return None
    try:
        data = profile_parse([(name, name) for name in names])
    except (ParseError, UnrecognisedFormat) as exc:
        print(f"accelboard parse: {exc}", file=sys.stderr)
        return None
    return summary(data)


if __name__ == "__main__":
    sys.exit(main())
