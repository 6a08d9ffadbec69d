"""The upload's report where the team reviews code: one pull-request comment edited in place and a
check run on GitHub, one merge-request note on GitLab.

Standard library only (urllib), Python 3.9+. The APIs, as their documentation gives them:

- GitHub REST (``Accept: application/vnd.github+json``, ``X-GitHub-Api-Version: 2022-11-28``,
  ``Authorization: Bearer <token>``): ``GET/POST /repos/{repo}/issues/{pr}/comments`` (pages of
  100, ``Link: <...>; rel="next"``), ``PATCH /repos/{repo}/issues/comments/{id}``,
  ``POST /repos/{repo}/check-runs``. A comment needs the token's ``pull-requests: write`` (or
  ``issues: write``) permission, a check run ``checks: write``.
- GitLab REST v4 (``PRIVATE-TOKEN: <token>``, a project or personal access token with the ``api``
  scope; ``CI_JOB_TOKEN`` cannot write notes): ``GET/POST
  /projects/{id}/merge_requests/{iid}/notes`` (pages of 100, ``X-Next-Page``),
  ``PUT /projects/{id}/merge_requests/{iid}/notes/{note_id}``.

One comment per pull request and key: the comment carries ``report.marker(key)`` and every later
push edits it (found again by the marker), never posting a second one. Rate limits (429, or 403
with ``x-ratelimit-remaining: 0``) are waited out as the answer says (``Retry-After``, else
``x-ratelimit-reset``), up to ``MAX_WAIT_S``; 502/503/504 are retried with backoff. Anything else
is a ``ForgeError`` naming what to fix (the permission a token lacks, the variable not set).
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable

from .report import marker

USER_AGENT = "accelboard-upload/1"
MAX_WAIT_S = 60.0
# GitHub's limit on a check run's output.summary (characters).
CHECK_SUMMARY_LIMIT = 65_535
_TRANSIENT = {502, 503, 504}
_LINK_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')


class ForgeError(Exception):
    """The comment, note or check could not be written; the message says what to fix."""


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: Any


def _wait_for(status: int, headers: dict[str, str], now: float) -> float | None:
    """Seconds a rate-limited answer asks to wait, or None when it is not one."""
    limited = status == 429 or (status == 403 and headers.get("x-ratelimit-remaining") == "0")
    if not limited:
        return None
    if headers.get("retry-after", "").strip().isdigit():
        return float(headers["retry-after"])
    reset = headers.get("x-ratelimit-reset", "").strip()
    if reset.isdigit():
        return max(0.0, float(reset) - now)
    return 60.0


def request(
    method: str,
    url: str,
    *,
    headers: dict[str, str],
    body: Any = None,
    timeout: float = 30.0,
    retries: int = 3,
    sleep: Callable[[float], None] = time.sleep,
    describe: Callable[[int, str], str],
) -> Answer:
    """One JSON request with the retries above; ``describe(status, message)`` words an error."""
    data = None if body is None else json.dumps(body).encode()
    all_headers = {"User-Agent": USER_AGENT, "Accept": "application/json", **headers}
    if data is not None:
        all_headers["Content-Type"] = "application/json"
    for attempt in range(retries + 1):
        last_try = attempt == retries
        req = urllib.request.Request(url, data=data, method=method, headers=all_headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as response:
                raw = response.read()
                answer_headers = {k.lower(): v for k, v in response.headers.items()}
                return Answer(response.status, answer_headers, json.loads(raw) if raw.strip() else None)
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            answer_headers = {k.lower(): v for k, v in exc.headers.items()} if exc.headers else {}
            wait = _wait_for(exc.code, answer_headers, time.time())
            if wait is not None and not last_try and wait <= MAX_WAIT_S:
                sleep(wait)
                continue
            if exc.code in _TRANSIENT and not last_try:
                sleep(2**attempt)
                continue
            raise ForgeError(describe(exc.code, _message(raw))) from None
        except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
            if not last_try:
                sleep(2**attempt)
                continue
            raise ForgeError(f"cannot reach {url}: {getattr(exc, 'reason', exc)}") from None
        except ValueError as exc:
            raise ForgeError(f"{url} did not answer JSON ({exc})") from None
    raise ForgeError(f"cannot reach {url}")  # not reached: the last try returns or raises


def _message(raw: bytes) -> str:
    try:
        answer = json.loads(raw)
    except ValueError:
        text = raw.decode("utf-8", "replace").strip()
        return text.splitlines()[0][:200] if text else "no message"
    if isinstance(answer, dict):
        message = answer.get("message") or answer.get("error") or answer
        return str(message)[:300]
    return str(answer)[:300]


def _object(value: Any) -> dict[str, Any]:
    """A JSON object, or an empty one for anything else (an event file of another shape)."""
    return value if isinstance(value, dict) else {}


# --- GitHub -------------------------------------------------------------------------------------


@dataclass
class GitHub:
    """Where a GitHub Actions job reports: the repository, its pull request (None on a push) and
    the commit the check run belongs to."""

    api: str
    repository: str
    pull_request: int | None
    sha: str
    token: str = field(repr=False)  # never printed
    timeout: float = 30.0
    retries: int = 3
    sleep: Callable[[float], None] = time.sleep

    @classmethod
    def from_env(cls, env: dict[str, str], *, token: str, **options: Any) -> GitHub:
        """From the variables GitHub Actions sets (``GITHUB_REPOSITORY``, ``GITHUB_API_URL``,
        ``GITHUB_EVENT_PATH``: the pull request's number and head commit, ``GITHUB_SHA``)."""
        repository = env.get("GITHUB_REPOSITORY", "")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repository):
            raise ForgeError(
                f"GITHUB_REPOSITORY: expected owner/name, got {repository!r} (is this a GitHub Actions job?)"
            )
        event: dict[str, Any] = {}
        path = env.get("GITHUB_EVENT_PATH", "")
        if path and os.path.isfile(path):
            try:
                with open(path, encoding="utf-8") as handle:
                    loaded = json.load(handle)
                event = loaded if isinstance(loaded, dict) else {}
            except (OSError, ValueError) as exc:
                raise ForgeError(f"GITHUB_EVENT_PATH: cannot read {path}: {exc}") from None
        pr: dict[str, Any] = _object(event.get("pull_request"))
        number = pr.get("number") if isinstance(pr.get("number"), int) else None
        if number is None:
            ref = re.fullmatch(r"refs/pull/(\d+)/(?:merge|head)", env.get("GITHUB_REF", ""))
            number = int(ref.group(1)) if ref else None
        head = _object(pr.get("head"))
        sha = str(head.get("sha") or env.get("GITHUB_SHA", ""))
        api = (env.get("GITHUB_API_URL") or "https://api.github.com").rstrip("/")
        return cls(api=api, repository=repository, pull_request=number, sha=sha, token=token, **options)

    def _call(self, method: str, url: str, *, needs: str, body: Any = None) -> Answer:
        def describe(status: int, message: str) -> str:
            if status == 401:
                return f"GitHub answered 401 ({message}): the GitHub token is not valid"
            if status in (403, 404):
                return (
                    f"GitHub answered {status} ({message}) for {method} {url}: "
                    f"the GitHub token needs the '{needs}' permission on {self.repository}"
                )
            return f"GitHub answered {status} for {method} {url}: {message}"

        return request(
            method,
            url,
            headers={
                "Authorization": f"Bearer {self.token}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
            },
            body=body,
            timeout=self.timeout,
            retries=self.retries,
            sleep=self.sleep,
            describe=describe,
        )

    def comment(self, body: str, *, key: str, create: bool) -> tuple[str, str]:
        """Edit the pull request's comment of ``key`` to ``body``, or post it (only if ``create``).
        Returns (what was done: created, updated or skipped, its URL)."""
        if self.pull_request is None:
            return "skipped", ""
        needs = "pull-requests: write"
        comments = f"{self.api}/repos/{self.repository}/issues/{self.pull_request}/comments"
        url: str | None = f"{comments}?per_page=100"
        found = None
        while url and found is None:
            answer = self._call("GET", url, needs=needs)
            page = answer.body if isinstance(answer.body, list) else []
            found = next(
                (c for c in page if isinstance(c, dict) and marker(key) in str(c.get("body", ""))), None
            )
            link = _LINK_NEXT.search(answer.headers.get("link", ""))
            url = link.group(1) if link else None
        if found is not None:
            answer = self._call(
                "PATCH",
                f"{self.api}/repos/{self.repository}/issues/comments/{found['id']}",
                needs=needs,
                body={"body": body},
            )
            return "updated", str((answer.body or {}).get("html_url", ""))
        if not create:
            return "skipped", ""
        answer = self._call("POST", comments, needs=needs, body={"body": body})
        return "created", str((answer.body or {}).get("html_url", ""))

    def check(self, *, name: str, conclusion: str, title: str, summary: str) -> str:
        """A completed check run on the commit; returns its URL."""
        if not self.sha:
            raise ForgeError("GITHUB_SHA: not set; a check run needs the commit it belongs to")
        if len(summary) > CHECK_SUMMARY_LIMIT:
            summary = summary[: CHECK_SUMMARY_LIMIT - 40] + "\n\n(cut at GitHub's length limit)"
        answer = self._call(
            "POST",
            f"{self.api}/repos/{self.repository}/check-runs",
            needs="checks: write",
            body={
                "name": name,
                "head_sha": self.sha,
                "status": "completed",
                "conclusion": conclusion,
                "output": {"title": title, "summary": summary},
            },
        )
        return str((answer.body or {}).get("html_url", ""))


# --- GitLab -------------------------------------------------------------------------------------


@dataclass
class GitLab:
    """Where a GitLab CI merge-request pipeline reports: the project and its merge request."""

    api: str
    project: str
    merge_request: int | None
    token: str = field(repr=False)  # never printed
    timeout: float = 30.0
    retries: int = 3
    sleep: Callable[[float], None] = time.sleep

    @classmethod
    def from_env(cls, env: dict[str, str], *, token: str, **options: Any) -> GitLab:
        """From the variables GitLab CI sets (``CI_API_V4_URL``, ``CI_PROJECT_ID``,
        ``CI_MERGE_REQUEST_IID`` in merge-request pipelines)."""
        api = env.get("CI_API_V4_URL", "").rstrip("/")
        if not api.startswith(("http://", "https://")):
            raise ForgeError(
                f"CI_API_V4_URL: expected the GitLab API's URL, got {api!r} (is this GitLab CI?)"
            )
        project = env.get("CI_PROJECT_ID", "")
        if not project.isdigit():
            raise ForgeError(f"CI_PROJECT_ID: expected the project's numeric id, got {project!r}")
        iid = env.get("CI_MERGE_REQUEST_IID", "")
        return cls(
            api=api,
            project=project,
            merge_request=int(iid) if iid.isdigit() else None,
            token=token,
            **options,
        )

    def note(self, body: str, *, key: str, create: bool) -> tuple[str, str]:
        """Edit the merge request's note of ``key``, or post it (only if ``create``)."""
        if self.merge_request is None:
            return "skipped", ""
        notes = f"{self.api}/projects/{self.project}/merge_requests/{self.merge_request}/notes"

        def describe(status: int, message: str) -> str:
            if status == 401:
                return f"GitLab answered 401 ({message}): the GitLab token is not valid"
            if status in (403, 404):
                return (
                    f"GitLab answered {status} ({message}): the GitLab token needs the 'api' scope "
                    f"and at least Reporter access to project {self.project}"
                )
            return f"GitLab answered {status}: {message}"

        def call(method: str, url: str, body: Any = None) -> Answer:
            return request(
                method,
                url,
                headers={"PRIVATE-TOKEN": self.token},
                body=body,
                timeout=self.timeout,
                retries=self.retries,
                sleep=self.sleep,
                describe=describe,
            )

        page: str | None = "1"
        found = None
        while page and found is None:
            query = urllib.parse.urlencode({"per_page": 100, "page": page, "sort": "asc"})
            answer = call("GET", f"{notes}?{query}")
            items = answer.body if isinstance(answer.body, list) else []
            found = next(
                (n for n in items if isinstance(n, dict) and marker(key) in str(n.get("body", ""))), None
            )
            page = answer.headers.get("x-next-page", "").strip() or None
        if found is not None:
            call("PUT", f"{notes}/{found['id']}", {"body": body})
            return "updated", ""
        if not create:
            return "skipped", ""
        call("POST", notes, {"body": body})
        return "created", ""
