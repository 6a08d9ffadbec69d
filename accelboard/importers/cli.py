"""``accelboard parse FILE... [--format NAME] [--context k=v ...]``: print normalised runs as JSON.

For checking a file before uploading it, and for scripts. Needs no server and no database (the
``accelboard`` entry point routes here before Django settings are loaded). Exit 0 when every file
parsed, 2 otherwise, with one error line per failed file on stderr; the runs of the files that did
parse are still printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .base import ParseError, UnrecognisedFormat
from .registry import FORMATS, ContextError, normalise_context, parse_path


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


def main(argv: list[str] | None = None) -> int:
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
    results: list[dict[str, Any]] = []
    failed = 0
    for name in args.files:
        try:
            runs = parse_path(name, fmt=args.fmt, context=pairs)
        except (ParseError, UnrecognisedFormat, ContextError) as exc:
            print(f"accelboard parse: {exc}", file=sys.stderr)
            failed += 1
            continue
        except FileNotFoundError:
            print(f"accelboard parse: {name}: no such file or directory", file=sys.stderr)
            failed += 1
            continue
        for run in runs:
            data = run.to_dict()
            if args.no_samples:
                for metric in data["metrics"]:
                    metric["samples"] = []
                data.pop("telemetry", None)
            results.append(data)
    json.dump(results, sys.stdout, indent=None if args.compact else 2, ensure_ascii=False)
    sys.stdout.write("\n")
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
