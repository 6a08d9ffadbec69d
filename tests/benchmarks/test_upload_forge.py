"""`accelboard upload` reports where the code is reviewed: the job summary, one pull-request comment
edited in place, a check run, one GitLab merge-request note.

GitHub and GitLab are outside services: each is a loopback HTTP server that answers as their REST
documentation says (pages with ``Link``/``X-Next-Page``, 401 for a bad token, 403 "Resource not
accessible by integration" for a missing permission, 429 with ``Retry-After``) and records what it
received. The accelboard server is real (``live_server``)."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from accelboard_upload import report
from accelboard_upload.cli import main

from accelboard.benchmarks.import_services import run_import
from accelboard.importers import parse_bytes
from tests.benchmarks.test_upload_cli import FIXTURES, _bench

REPO = "acme/serving"
SHA = "a" * 40
PR = 7


class Forge(ThreadingHTTPServer):
    """State shared by one fake's handlers: what it holds and every request it got."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], token: str) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.token = token
        self.permissions = {"pull-requests", "checks"}
        self.comments: list[dict[str, Any]] = []
        self.check_runs: list[dict[str, Any]] = []
        self.requests: list[tuple[str, str]] = []
        self.limit_next = 0  # answer this many requests with a rate limit first
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Forge

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(raw)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(raw)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length)) if length else None

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_PATCH(self) -> None:
        self._route("PATCH")

    def do_PUT(self) -> None:
        self._route("PUT")

    def _route(self, method: str) -> None:
        raise NotImplementedError


class GitHubHandler(_Handler):
    """GitHub REST v3 as documented: issue comments of a pull request and check runs."""

    def _route(self, method: str) -> None:
        forge = self.server
        url = urlsplit(self.path)
        with forge.lock:
            forge.requests.append((method, self.path))
            if self.headers.get("Authorization") != f"Bearer {forge.token}":
                return self._answer(401, {"message": "Bad credentials", "status": "401"})
            if forge.limit_next:
                forge.limit_next -= 1
                return self._answer(
                    429, {"message": "You have exceeded a secondary rate limit."}, {"Retry-After": "1"}
                )
            comments = f"/repos/{REPO}/issues/{PR}/comments"
            if url.path == comments and method == "GET":
                page = int(parse_qs(url.query).get("page", ["1"])[0])
                size = int(parse_qs(url.query).get("per_page", ["30"])[0])
                items = forge.comments[(page - 1) * size : page * size]
                headers = {}
                if page * size < len(forge.comments):
                    headers["Link"] = f'<{forge.url}{comments}?per_page={size}&page={page + 1}>; rel="next"'
                return self._answer(200, items, headers)
            if (
                url.path == comments
                and method == "POST"
                or url.path.startswith(f"/repos/{REPO}/issues/comments/")
            ):
                if "pull-requests" not in forge.permissions:
                    return self._answer(403, {"message": "Resource not accessible by integration"})
                body = self._body()
                if not isinstance(body, dict) or not isinstance(body.get("body"), str):
                    return self._answer(422, {"message": 'Invalid request.\n\n"body" wasn\'t supplied.'})
                if method == "POST":
                    comment = {"id": 1000 + len(forge.comments), "body": body["body"]}
                    comment["html_url"] = (
                        f"https://github.example/{REPO}/pull/{PR}#issuecomment-{comment['id']}"
                    )
                    forge.comments.append(comment)
                    return self._answer(201, comment)
                number = int(url.path.rsplit("/", 1)[1])
                comment = next((c for c in forge.comments if c["id"] == number), None)
                if comment is None or method != "PATCH":
                    return self._answer(404, {"message": "Not Found"})
                comment["body"] = body["body"]
                return self._answer(200, comment)
            if url.path == f"/repos/{REPO}/check-runs" and method == "POST":
                if "checks" not in forge.permissions:
                    return self._answer(403, {"message": "Resource not accessible by integration"})
                body = self._body()
                if not re.fullmatch(r"[0-9a-f]{40}", str(body.get("head_sha"))) or body.get(
                    "conclusion"
                ) not in ("success", "failure", "neutral"):
                    return self._answer(422, {"message": "Invalid request."})
                forge.check_runs.append(body)
                return self._answer(
                    201, {"id": len(forge.check_runs), "html_url": "https://github.example/check"}
                )
            return self._answer(404, {"message": "Not Found"})


class GitLabHandler(_Handler):
    """GitLab REST v4 as documented: notes of a merge request."""

    def _route(self, method: str) -> None:
        forge = self.server
        url = urlsplit(self.path)
        with forge.lock:
            forge.requests.append((method, self.path))
            if self.headers.get("PRIVATE-TOKEN") != forge.token:
                return self._answer(401, {"message": "401 Unauthorized"})
            notes = "/api/v4/projects/42/merge_requests/3/notes"
            if url.path == notes and method == "GET":
                query = parse_qs(url.query)
                page, size = int(query.get("page", ["1"])[0]), int(query.get("per_page", ["20"])[0])
                more = page * size < len(forge.comments)
                return self._answer(
                    200,
                    forge.comments[(page - 1) * size : page * size],
                    {"X-Next-Page": str(page + 1) if more else ""},
                )
            if url.path == notes and method == "POST":
                note = {"id": 500 + len(forge.comments), "body": self._body()["body"]}
                forge.comments.append(note)
                return self._answer(201, note)
            if url.path.startswith(notes + "/") and method == "PUT":
                number = int(url.path.rsplit("/", 1)[1])
                note = next((n for n in forge.comments if n["id"] == number), None)
                if note is None:
                    return self._answer(404, {"message": "404 Not found"})
                note["body"] = self._body()["body"]
                return self._answer(200, note)
            return self._answer(404, {"message": "404 Not found"})


def _serve(handler: type[BaseHTTPRequestHandler], token: str) -> Any:
    forge = Forge(handler, token)
    thread = threading.Thread(target=forge.serve_forever, daemon=True)
    thread.start()
    return forge


@pytest.fixture
def github() -> Any:
    forge = _serve(GitHubHandler, "ghs_" + "t" * 36)
    # A busy pull request: 120 comments of people before ours, so ours lands on page 2.
    forge.comments = [{"id": i, "body": f"review comment {i}", "html_url": ""} for i in range(120)]
    yield forge
    forge.shutdown()


@pytest.fixture
def gitlab() -> Any:
    forge = _serve(GitLabHandler, "glpat-" + "x" * 20)
    forge.comments = [{"id": i, "body": f"note {i}"} for i in range(130)]
    yield forge
    forge.shutdown()


@pytest.fixture
def ci(server: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A CI job's summary file (after ``server``, which clears the CI variables)."""
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    return summary


def _github_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, github: Any) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": PR, "head": {"sha": SHA}}}))
    for name, value in {
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_API_URL": github.url,
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_SHA": "b" * 40,  # the merge commit: the check belongs on the head commit
        "GITHUB_TOKEN": github.token,
    }.items():
        monkeypatch.setenv(name, value)


def _ours(forge: Any) -> list[dict[str, Any]]:
    return [c for c in forge.comments if report.marker("default") in c["body"]]


def _args(server: str, token: str, *extra: str) -> list[str]:
    return ["--server", server, "--token", token, "--accelerator", "L4", *extra]


def test_a_pull_request_run_twice_shows_one_edited_comment_and_a_check(
    server: str,
    token: str,
    ci: Path,
    github: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: Any,
) -> None:
    _github_env(monkeypatch, tmp_path, github)
    vllm = str(FIXTURES / "vllm_2025.json")
    assert main([vllm, *_args(server, token)]) == 0
    first = capsys.readouterr().out
    assert "pull request comment: created https://github.example/" in first
    assert main([vllm, *_args(server, token)]) == 0
    assert "pull request comment: updated" in capsys.readouterr().out

    (comment,) = _ours(github)
    assert len(github.comments) == 121  # the 120 before, and ours once
    assert comment["body"].startswith(report.marker("default"))
    assert "accelboard: no change in 1 run" in comment["body"]
    assert "| throughput_tokens_per_s |" in comment["body"] and "already uploaded" in comment["body"]
    methods = [method for method, path in github.requests if "/comments" in path and method != "GET"]
    assert methods == ["POST", "PATCH"]
    # Every page was read to find ours (page 2), never a second POST.
    assert any("page=2" in path for method, path in github.requests if method == "GET")
    assert [run["conclusion"] for run in github.check_runs] == ["success", "success"]
    assert {run["head_sha"] for run in github.check_runs} == {SHA}
    assert github.check_runs[0]["output"]["title"] == "no change in 1 run"
    # The job's summary page got the report at each run, appended.
    assert ci.read_text().count("### ✅ accelboard: no change in 1 run") == 2


def test_the_check_fails_with_fail_on_regression_and_the_comment_says_why(
    server: str,
    token: str,
    team: Any,
    ci: Path,
    github: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: Any,
) -> None:
    _github_env(monkeypatch, tmp_path, github)
    for day, factor in enumerate([1.0, 1.01, 0.99, 1.005, 0.995], start=1):
        path = _bench(tmp_path / f"seed{day}.json", factor=factor, day=day)
        (parsed,) = parse_bytes(path.read_bytes(), filename=path.name)
        run_import(
            team=team, parsed=parsed, raw_name=path.name, raw_bytes=path.read_bytes(), uploaded_via="api"
        )
    worse = _bench(tmp_path / "worse.json", factor=1.2, day=9)
    # Only on a change: this one is a regression, so the comment is posted.
    code = main(
        [str(worse), "--server", server, "--token", token, "--fail-on-regression", "--comment", "change"]
    )
    assert code == 1, capsys.readouterr().out
    (comment,) = _ours(github)
    assert "### ❌ accelboard: 1 regression in 1 run" in comment["body"]
    row = next(line for line in comment["body"].splitlines() if line.startswith("| latency_mean_ms |"))
    assert "| +20.0 | 🔴 regression |" in row
    assert github.check_runs[-1]["conclusion"] == "failure"
    # Without the flag the job passes and the check says so without failing.
    assert main([str(worse), "--server", server, "--token", token]) == 0
    assert github.check_runs[-1]["conclusion"] == "neutral"


def test_no_comment_is_posted_without_a_change_when_asked_only_on_change(
    server: str,
    token: str,
    ci: Path,
    github: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: Any,
) -> None:
    _github_env(monkeypatch, tmp_path, github)
    assert main([str(FIXTURES / "vllm_2025.json"), *_args(server, token, "--comment", "change")]) == 0
    assert "pull request comment: not posted (no change; --comment)" in capsys.readouterr().out
    assert _ours(github) == [] and len(github.check_runs) == 1


def test_a_rate_limited_answer_is_waited_out(
    server: str, token: str, ci: Path, github: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _github_env(monkeypatch, tmp_path, github)
    github.limit_next = 1  # 429 with Retry-After: 1 on the first request
    assert main([str(FIXTURES / "vllm_2025.json"), *_args(server, token)]) == 0
    assert len(_ours(github)) == 1 and len(github.check_runs) == 1


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ("permissions", "the GitHub token needs the 'checks: write' permission on acme/serving"),
        ("token", "GitHub answered 401 (Bad credentials): the GitHub token is not valid"),
        ("repository", "GITHUB_REPOSITORY: expected owner/name, got 'not a repo'"),
    ],
)
def test_a_forge_that_refuses_is_an_error_naming_what_to_fix(
    server: str,
    token: str,
    ci: Path,
    github: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: Any,
    change: str,
    words: str,
) -> None:
    _github_env(monkeypatch, tmp_path, github)
    if change == "permissions":
        github.permissions = {"pull-requests"}
    elif change == "token":
        monkeypatch.setenv("GITHUB_TOKEN", "ghs_wrong")
    else:
        monkeypatch.setenv("GITHUB_REPOSITORY", "not a repo")
    assert main([str(FIXTURES / "vllm_2025.json"), *_args(server, token)]) == 2
    assert words in capsys.readouterr().err
    assert github.check_runs == []


def test_a_merge_request_gets_one_note_edited_in_place(
    server: str, token: str, ci: Path, gitlab: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    for name, value in {
        "CI_API_V4_URL": f"{gitlab.url}/api/v4",
        "CI_PROJECT_ID": "42",
        "CI_MERGE_REQUEST_IID": "3",
        "GITLAB_TOKEN": gitlab.token,
    }.items():
        monkeypatch.setenv(name, value)
    for expected in ("created", "updated"):
        assert main([str(FIXTURES / "vllm_2025.json"), *_args(server, token)]) == 0
        assert f"merge request note: {expected}" in capsys.readouterr().out
    assert len(_ours(gitlab)) == 1 and len(gitlab.comments) == 131
    assert [m for m, _ in gitlab.requests if m != "GET"] == ["POST", "PUT"]


def test_the_markdown_escapes_what_would_break_a_table() -> None:
    run = {
        "id": 5,
        "url": "/runs/5/",
        "file": "a|b.json",
        "source_format": "vllm-serving",
        "model": "M",
        "variant": "bf16",
        "accelerator": "H100",
        "accelerator_count": 8,
        "metrics": [
            {"name": "tok|s", "value": 1234567.891, "unit": "tok/s", "baseline": 0.0000123, "delta_pct": None,
             "verdict": "new"},
        ],
    }  # fmt: skip
    text = report.markdown([run], server="https://ab.example/", commit="c" * 40, key="k")
    assert text.startswith("<!-- accelboard-report:k -->\n")
    assert "**a\\|b.json**" in text and "[run 5](https://ab.example/runs/5/)" in text
    assert "| tok\\|s | 1,234,568 | tok/s | 0.0000123 | - | new (no baseline) |" in text
    assert "e-0" not in text and "Commit `cccccccccccc`" in text
