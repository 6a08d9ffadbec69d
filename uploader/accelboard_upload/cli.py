"""``accelboard-upload FILE... --server URL --token T``: send result files to accelboard from CI.

Standard library only (urllib, multipart built by hand), Python 3.9+, no Django: a CI job installs
this package alone (``pip install ./uploader``). A server install runs the same program as
``accelboard upload`` (its entry point routes here before settings are loaded).

1. Files are read as given; a directory (an MLPerf results folder) is sent as a .tar.gz of itself.
   All files go in one request, which the server stores all or none.
2. Provenance not given on the command line comes from the CI's environment (GitHub Actions,
   GitLab CI), then from ``git rev-parse`` in the working directory.
3. The server answers with each run's metrics against their series' baselines; a table per run is
   printed, headed by what the files' model and accelerator names resolved to in the catalogue
   (``llama2-70b-99 -> Llama-2-70B (alias)``). A name the catalogue cannot place without doubt
   is refused with the close candidates: ``--model``/``--accelerator`` pick one (and apply over
   what the files say), ``--create-model`` adds the model as new, ``--remember`` keeps the files'
   names as the team's aliases of what was picked. Exit codes: 0 stored (or already stored: a retried upload is the same run), 1 with
   ``--fail-on-regression`` when any metric's verdict is a regression, 2 on any error (a file
   that cannot be read, the server's 4xx with its message, an unreachable server).
4. Transient failures (connection refused or reset, 502/503/504) are retried with backoff: safe,
   because the server recognises a file it already has.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from . import forge, report

USER_AGENT = "accelboard-upload/1"
EXIT_OK, EXIT_REGRESSION, EXIT_ERROR = 0, 1, 2
COMMENT_WHEN = ("always", "change", "regression", "never")
CHECK_NAME = "accelboard"
_TRANSIENT = {502, 503, 504}


class UploadError(Exception):
    """Anything that ends the upload with exit 2; the message is printed as is."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="accelboard upload",
        description="Upload benchmark result files (or directories, or archives) to an accelboard server "
        "and compare each metric with its series' baseline.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="result file, directory or archive")
    parser.add_argument(
        "--server", default=os.environ.get("ACCELBOARD_SERVER", ""), help="$ACCELBOARD_SERVER"
    )
    parser.add_argument("--token", default=os.environ.get("ACCELBOARD_TOKEN", ""), help="$ACCELBOARD_TOKEN")
    parser.add_argument("--commit", help="git commit (default: from the CI environment or git)")
    parser.add_argument("--branch", help="branch (default: from the CI environment or git)")
    parser.add_argument("--ci-url", help="link to the CI job (default: from the CI environment)")
    parser.add_argument(
        "--context",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="what the files lack or any label: model=, precision=, batch_size=, ... (repeatable)",
    )
    parser.add_argument(
        "--accelerator", help="accelerator type (a catalogue name or alias); applies over what the files say"
    )
    parser.add_argument("--count", help="accelerators used; applies over what the files say")
    parser.add_argument("--precision", help="precision; applies over what the files say")
    parser.add_argument("--model", help="model (a catalogue name or alias); applies over what the files say")
    parser.add_argument(
        "--scenario",
        help="how the load was offered (offline, server, serving, single-stream, multi-stream, "
        "interactive); applies over what the files say",
    )
    parser.add_argument(
        "--create-model",
        action="store_true",
        help="add the model (--model, else the files' name) to the catalogue when it is not there",
    )
    parser.add_argument(
        "--remember",
        action="store_true",
        help="keep the files' model and accelerator names as the team's aliases of --model/--accelerator",
    )
    parser.add_argument("--format", dest="fmt", help="skip detection and read as this format")
    parser.add_argument(
        "--profile",
        action="append",
        default=[],
        metavar="TRACE",
        help="a profiler trace (PyTorch profiler JSON[.gz], one per rank; an nsys SQLite export; or nsys "
        "stats CSVs) to attach "
        "to the run (repeatable)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="refuse a --profile trace from other hardware than the run's (its device or device count), "
        "instead of attaching it with a warning",
    )
    parser.add_argument(
        "--fail-on-regression", action="store_true", help="exit 1 when any metric is a regression"
    )
    group = parser.add_argument_group(
        "reporting where the code is reviewed",
        "the comparison as Markdown: appended to $GITHUB_STEP_SUMMARY when set; with a GitHub token "
        "one pull-request comment (edited in place on every push) and a check run; with a GitLab "
        "token one merge-request note (docs/ci-snippets.md)",
    )
    group.add_argument(
        "--summary-file",
        default=os.environ.get("GITHUB_STEP_SUMMARY", ""),
        help="append the Markdown report here (default: $GITHUB_STEP_SUMMARY)",
    )
    group.add_argument(
        "--github-token",
        default=os.environ.get("ACCELBOARD_GITHUB_TOKEN") or os.environ.get("GITHUB_TOKEN", ""),
        help="comment on the pull request and add a check run ($ACCELBOARD_GITHUB_TOKEN or $GITHUB_TOKEN; "
        "needs pull-requests: write and checks: write)",
    )
    group.add_argument(
        "--gitlab-token",
        default=os.environ.get("ACCELBOARD_GITLAB_TOKEN") or os.environ.get("GITLAB_TOKEN", ""),
        help="note on the merge request ($ACCELBOARD_GITLAB_TOKEN or $GITLAB_TOKEN; a token with the api scope)",
    )
    group.add_argument(
        "--comment",
        choices=COMMENT_WHEN,
        default="always",
        help="when to post the comment or note: always (default), change (a regression or improvement), "
        "regression, never; an existing one is always kept up to date",
    )
    group.add_argument(
        "--comment-key",
        default="default",
        help="one comment per pull request and key (a job matrix gives each job its own; default: default)",
    )
    group.add_argument(
        "--no-check", dest="check", action="store_false", help="no GitHub check run (with --github-token)"
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per request (default 120)")
    parser.add_argument("--retries", type=int, default=3, help="retries of transient failures (default 3)")
    return parser


# --- provenance -----------------------------------------------------------------------------------


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def provenance_from_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """commit, branch and ci_url from GitHub Actions or GitLab CI variables, else from git."""
    env = dict(os.environ if env is None else env)
    commit = env.get("GITHUB_SHA") or env.get("CI_COMMIT_SHA") or ""
    branch = env.get("GITHUB_HEAD_REF") or env.get("GITHUB_REF_NAME") or env.get("CI_COMMIT_REF_NAME") or ""
    ci_url = env.get("CI_JOB_URL", "")
    if not ci_url and env.get("GITHUB_RUN_ID") and env.get("GITHUB_REPOSITORY"):
        server = env.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
        ci_url = f"{server}/{env['GITHUB_REPOSITORY']}/actions/runs/{env['GITHUB_RUN_ID']}"
    if not commit:
        commit = _git("rev-parse", "HEAD")
    if not branch:
        branch = _git("rev-parse", "--abbrev-ref", "HEAD")
        branch = "" if branch == "HEAD" else branch  # a detached checkout names no branch
    return {"commit": commit, "branch": branch, "ci_url": ci_url}


# --- request ----------------------------------------------------------------------------------------


def _read(name: str) -> tuple[str, bytes]:
    path = Path(name)
    if path.is_dir():
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
            archive.add(path, arcname=path.resolve().name)
        return f"{path.resolve().name}.tar.gz", buffer.getvalue()
    try:
        return path.name, path.read_bytes()
    except FileNotFoundError:
        raise UploadError(f"{name}: no such file or directory") from None
    except OSError as exc:
        raise UploadError(f"{name}: cannot read: {exc.strerror or exc}") from None


def multipart(
    fields: dict[str, str], files: list[tuple[str, bytes]], profiles: list[tuple[str, bytes]] | None = None
) -> tuple[bytes, str]:
    """A multipart/form-data body and its content type; files go in the ``file`` field, profiler
    traces in ``profile``."""
    boundary = f"accelboard-{uuid.uuid4().hex}"
    parts: list[bytes] = []
    for key, value in fields.items():
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n'.encode()
            + value.encode()
            + b"\r\n"
        )
    for field, (name, data) in [("file", item) for item in files] + [
        ("profile", item) for item in profiles or []
    ]:
        safe = name.replace('"', "_").replace("\r", "_").replace("\n", "_")
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; filename="{safe}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n".encode()
            + data
            + b"\r\n"
        )
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


# What to do when the server cannot place a name, by the field it names.
_HINTS = {
    "model": "pick the model with --model NAME, or add it with --create-model (and --remember to keep the name)",
    "accelerator": "pick the accelerator with --accelerator NAME (and --remember to keep the name)",
}


def _server_message(status: int, raw: bytes) -> str:
    try:
        error = json.loads(raw)["error"]
        where = f" (field: {error['path']})" if error.get("path") else ""
        hint = f"\n  {_HINTS[error['path']]}" if error.get("path") in _HINTS else ""
        return f"server answered {status}: {error['message']}{where}{hint}"
    except (ValueError, KeyError, TypeError):
        text = raw.decode("utf-8", "replace").strip().splitlines()
        return f"server answered {status}: {text[0][:200] if text else 'no message'}"


def post(
    url: str, *, token: str, body: bytes, content_type: str, timeout: float, retries: int
) -> dict[str, Any]:
    """POST with retries of transient failures; the decoded JSON answer, or UploadError."""
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": content_type, "User-Agent": USER_AGENT},
    )
    for attempt in range(retries + 1):
        last_try = attempt == retries
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            if exc.code in _TRANSIENT and not last_try:
                time.sleep(2**attempt)
                continue
            raise UploadError(_server_message(exc.code, raw)) from None
        except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
            if not last_try:
                time.sleep(2**attempt)
                continue
            reason = getattr(exc, "reason", exc)
            raise UploadError(f"cannot reach {url}: {reason}") from None
        except ValueError as exc:  # a 2xx that is not JSON: not an accelboard server
            raise UploadError(
                f"{url} did not answer JSON ({exc}); is --server an accelboard server?"
            ) from None
    raise UploadError(f"cannot reach {url}")  # not reached: the last try returns or raises


# --- output -----------------------------------------------------------------------------------------


def _number(value: Any, digits: int = 4) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}g}" if isinstance(value, float) else str(value)


def _identity(raw: str | None, name: str | None, how: str | None) -> str:
    """``llama2-70b-99 -> Llama-2-70B (alias)``; the name alone when the file's was the same."""
    if not name:
        return raw or "-"
    if not raw or raw == name:
        return f"{name} ({how})" if how and how != "exact" else name
    return f"{raw} -> {name} ({how})" if how else f"{raw} -> {name}"


def table(run: dict[str, Any]) -> str:
    """One run's header and its metrics: metric, value, unit, baseline, delta %, verdict."""
    state = "already uploaded" if run.get("duplicate") else "stored"
    model = _identity(run.get("model_name"), run["model"], run.get("model_match"))
    accelerator = _identity(run.get("accelerator_name"), run["accelerator"], run.get("accelerator_match"))
    header = (
        f"{run['file']}: {run['source_format']} · {model} {run['variant']} · "
        f"{run['accelerator_count']}× {accelerator if run['accelerator'] else 'no accelerator'} · "
        f"{state} as run {run['id']} ({run['url']})"
    )
    rows = [("metric", "value", "unit", "baseline", "delta %", "verdict")]
    for metric in run["metrics"]:
        delta = metric.get("delta_pct")
        rows.append(
            (
                metric["name"],
                _number(metric["value"], 6),
                metric["unit"],
                _number(metric.get("baseline"), 6),
                "-" if delta is None else f"{delta:+.1f}",
                metric["verdict"].upper() if metric["verdict"] == "regression" else metric["verdict"],
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    right = {1, 3, 4}
    lines = [
        "  ".join(
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(row)
        )
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join([header, *lines])


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse printed why; keep the exit-code contract
        return EXIT_OK if exc.code == 0 else EXIT_ERROR
    try:
        return _upload(args)
    except UploadError as exc:
        print(f"accelboard upload: {exc}", file=sys.stderr)
        return EXIT_ERROR


def _upload(args: argparse.Namespace) -> int:
    if not args.server:
        raise UploadError("no server: give --server URL or set ACCELBOARD_SERVER")
    if not args.token:
        raise UploadError("no token: give --token T or set ACCELBOARD_TOKEN")
    if not args.server.startswith(("http://", "https://")):
        raise UploadError(f"--server must be an http(s) URL, not {args.server!r}")
    for item in args.context:
        key, sep, _ = item.partition("=")
        if not sep or not key.strip():
            raise UploadError(f"--context {item!r}: expected KEY=VALUE")
    files = [_read(name) for name in args.files]
    found = provenance_from_env()
    fields = {
        "commit": args.commit if args.commit is not None else found["commit"],
        "branch": args.branch if args.branch is not None else found["branch"],
        "ci_url": args.ci_url if args.ci_url is not None else found["ci_url"],
        "context": "\n".join(args.context),
        "accelerator": args.accelerator or "",
        "count": args.count or "",
        "precision": args.precision or "",
        "model": args.model or "",
        "scenario": args.scenario or "",
        "create_model": "1" if args.create_model else "",
        "remember": "1" if args.remember else "",
        "format": args.fmt or "",
        "strict": "1" if args.strict and args.profile else "",
    }
    fields = {key: value for key, value in fields.items() if value}
    profiles = [_read(name) for name in args.profile]
    body, content_type = multipart(fields, files, profiles)
    url = args.server.rstrip("/") + "/api/v1/runs"
    answer = post(
        url,
        token=args.token,
        body=body,
        content_type=content_type,
        timeout=args.timeout,
        retries=args.retries,
    )
    runs = answer.get("runs")
    if not isinstance(runs, list):
        raise UploadError(f"{url} answered without runs; is the server older than multipart uploads?")
    regressions = []
    for run in runs:
        print(table(run))
        if run.get("profile_url"):
            print(f"profile: {args.server.rstrip('/')}{run['profile_url']}")
            for warning in run.get("profile_warnings") or []:
                print(f"profile warning: {warning}")
        print()
        regressions += [f"{run['file']}: {m['name']}" for m in run["metrics"] if m["verdict"] == "regression"]
    if regressions:
        print(f"{len(regressions)} regression(s): {', '.join(regressions)}")
    _report(args, runs, commit=fields.get("commit", ""))
    if regressions and args.fail_on_regression:
        return EXIT_REGRESSION
    return EXIT_OK


def _report(args: argparse.Namespace, runs: list[dict[str, Any]], *, commit: str) -> None:
    """The comparison where the code is reviewed: the job's summary, the pull request's comment
    and check run, the merge request's note. A forge that refuses is an error (exit 2) naming
    what the token lacks; the runs are stored by then, and a re-run finds them again."""
    server = args.server.rstrip("/")
    if args.summary_file:
        try:
            with open(args.summary_file, "a", encoding="utf-8") as handle:
                handle.write(report.markdown(runs, server=server, commit=commit) + "\n")
        except OSError as exc:
            raise UploadError(
                f"--summary-file {args.summary_file}: cannot write: {exc.strerror or exc}"
            ) from None
    found = report.counts(runs)
    create = {
        "always": True,
        "change": any(found.get(verdict) for verdict in report.CHANGES),
        "regression": bool(found.get("regression")),
        "never": False,
    }[args.comment]
    body = report.markdown(runs, server=server, commit=commit, key=args.comment_key)
    options = {"timeout": min(args.timeout, 30.0), "retries": args.retries}
    try:
        if args.github_token:
            github = forge.GitHub.from_env(dict(os.environ), token=args.github_token, **options)
            if args.comment != "never" or github.pull_request is None:
                done, url = github.comment(body, key=args.comment_key, create=create)
                print(_forge_line("pull request comment", done, url, github.pull_request is None))
            if args.check:
                regressed = bool(found.get("regression"))
                conclusion = ("failure" if args.fail_on_regression else "neutral") if regressed else "success"
                url = github.check(
                    name=CHECK_NAME
                    if args.comment_key == "default"
                    else f"{CHECK_NAME} ({args.comment_key})",
                    conclusion=conclusion,
                    title=report.headline(runs),
                    summary=report.markdown(runs, server=server, commit=commit),
                )
                print(f"check run: {conclusion}" + (f" {url}" if url else ""))
        if args.gitlab_token and args.comment != "never":
            gitlab = forge.GitLab.from_env(dict(os.environ), token=args.gitlab_token, **options)
            done, url = gitlab.note(body, key=args.comment_key, create=create)
            print(_forge_line("merge request note", done, url, gitlab.merge_request is None))
    except forge.ForgeError as exc:
        raise UploadError(str(exc)) from None


def _forge_line(what: str, done: str, url: str, no_review: bool) -> str:
    if no_review:
        return f"{what}: none (not a pull or merge request pipeline)"
    if done == "skipped":
        return f"{what}: not posted (no change; --comment)"
    return f"{what}: {done}" + (f" {url}" if url else "")


if __name__ == "__main__":
    sys.exit(main())
