"""A request line or header fields past the limits: 414 and 431 from a real gunicorn run with
the image's configuration, in the API's JSON error shape on /api/ and as plain text elsewhere
(gunicorn's own limits sit above the application's, whose answers a client can read); and its
workers replaced when they grow, not after a count of requests."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.test import Client

from accelboard.core.middleware import MAX_HEADER_FIELD, MAX_HEADER_FIELDS, MAX_REQUEST_LINE

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _database_url() -> str:
    db = django_settings.DATABASES["default"]
    user = db.get("USER") or "postgres"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return (
        f"postgres://{user}{password}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"
    )


@pytest.fixture
def gunicorn(transactional_db: None, tmp_path: Path) -> Iterator[tuple[str, int]]:
    """gunicorn serving ``accelboard.wsgi`` with ``accelboard.gunicorn_conf`` on loopback."""
    with _serving(tmp_path) as server:
        yield server


@contextlib.contextmanager
def _serving(tmp_path: Path, **settings: str) -> Iterator[tuple[str, int]]:
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "GUNICORN_BIND": f"127.0.0.1:{port}",
        "WEB_CONCURRENCY": "1",
        "GUNICORN_THREADS": "2",
        **settings,
    }
    log = (tmp_path / "gunicorn.log").open("w")
    command = [
        str(Path(sys.executable).parent / "gunicorn"),
        "accelboard.wsgi",
        "--config",
        "python:accelboard.gunicorn_conf",
    ]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                pytest.fail(f"gunicorn exited: {(tmp_path / 'gunicorn.log').read_text()[-3000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("gunicorn did not listen within 120 s")
                time.sleep(0.2)
        yield "127.0.0.1", port
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _get(server: tuple[str, int], path: str, headers: list[tuple[str, str]] = ()) -> tuple[int, str, str]:
    connection = http.client.HTTPConnection(*server, timeout=30)
    try:
        connection.putrequest("GET", path, skip_host=True)
        connection.putheader("Host", "127.0.0.1")
        for name, value in headers:
            connection.putheader(name, value)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read().decode()
    finally:
        connection.close()


def _json_error(content_type: str, body: str) -> dict[str, Any]:
    assert content_type.startswith("application/json"), (content_type, body)
    error = json.loads(body)["error"]
    assert set(error) == {"code", "message", "path"}
    return dict(error)


def test_gunicorn_hands_the_limits_to_the_application_which_answers_in_the_api_shape(
    gunicorn: tuple[str, int],
) -> None:
    # A request within the limits reaches the API (401 without a token).
    status, kind, body = _get(gunicorn, "/api/v1/runs")
    assert status == 401 and _json_error(kind, body)["code"] == "unauthenticated"

    long_query = "/api/v1/runs?model=" + "m" * MAX_REQUEST_LINE
    status, kind, body = _get(gunicorn, long_query)
    error = _json_error(kind, body)
    assert status == 414 and error["code"] == "uri_too_long"
    assert f"at most {MAX_REQUEST_LINE:,}" in error["message"]

    status, kind, body = _get(gunicorn, "/api/v1/runs", [("X-Note", "n" * MAX_HEADER_FIELD)])
    error = _json_error(kind, body)
    assert status == 431 and error["code"] == "header_too_large" and "X-Note" in error["message"]

    many = [(f"X-Field-{i}", "1") for i in range(MAX_HEADER_FIELDS + 10)]
    status, kind, body = _get(gunicorn, "/api/v1/runs", many)
    error = _json_error(kind, body)
    assert status == 431 and error["code"] == "too_many_headers"


def test_pages_get_the_same_answers_as_plain_text(gunicorn: tuple[str, int]) -> None:
    status, kind, body = _get(gunicorn, "/accounts/login/?next=" + "x" * MAX_REQUEST_LINE)
    assert status == 414 and kind.startswith("text/plain")
    assert "request line" in body and "<html" not in body.lower()
    status, kind, body = _get(gunicorn, "/accounts/login/", [("Cookie", "c=" + "x" * MAX_HEADER_FIELD)])
    assert status == 431 and kind.startswith("text/plain") and "Cookie" in body


def test_the_limits_hold_without_gunicorn_too(client: Client) -> None:
    """The middleware alone (Django's test client): at the limit passes, one byte more does not."""
    base = "/api/v1/runs?model="
    at_limit = base + "m" * (MAX_REQUEST_LINE - len("GET  HTTP/1.1") - len(base))
    assert client.get(at_limit).status_code == 401
    response = client.get(at_limit + "m")
    assert response.status_code == 414 and response.json()["error"]["code"] == "uri_too_long"
    value = "v" * (MAX_HEADER_FIELD - len("X-Note: \r\n"))
    assert client.get("/api/v1/runs", HTTP_X_NOTE=value).status_code == 401
    response = client.get("/api/v1/runs", HTTP_X_NOTE=value + "v")
    assert response.status_code == 431 and "X-Note" in response.json()["error"]["message"]


def test_the_request_line_limit_is_a_setting_and_zero_turns_it_off(settings: Any, db: None) -> None:
    # Behind a proxy that enforces its own (and in CI's API fuzzing, beside gunicorn's off).
    from django.test import Client

    long_query = "/api/v1/runs?model=" + "m" * MAX_REQUEST_LINE
    assert Client().get(long_query).status_code == 414
    settings.REQUEST_LINE_LIMIT = 0
    assert Client().get(long_query).status_code == 401  # answered: the token is missing


def _workers_booted(tmp_path: Path) -> int:
    return (tmp_path / "gunicorn.log").read_text().count("Booting worker with pid")


def _pages(server: tuple[str, int], count: int) -> None:
    for _ in range(count):
        status, _kind, _body = _get(server, "/accounts/login/")
        assert status == 200


def test_a_worker_that_grew_past_the_bound_is_replaced(transactional_db: None, tmp_path: Path) -> None:
    # A bound of 1 MB: the first pages (templates compiled, a database connection) grow the
    # worker past it within the first checks; the master forks a new one, which serves on.
    with _serving(tmp_path, GUNICORN_MAX_WORKER_GROWTH_MB="1") as server:
        _pages(server, 200)
        log = (tmp_path / "gunicorn.log").read_text()
        assert "Replacing worker after" in log and "GUNICORN_MAX_WORKER_GROWTH_MB=1" in log
        assert _workers_booted(tmp_path) >= 2
        _pages(server, 5)


def test_a_worker_that_stays_within_the_bound_serves_on(transactional_db: None, tmp_path: Path) -> None:
    # The defaults: 200 pages grow no worker by 768 MB, and the request count (200,000) is far.
    with _serving(tmp_path) as server:
        _pages(server, 200)
        assert _workers_booted(tmp_path) == 1
        assert "Replacing worker" not in (tmp_path / "gunicorn.log").read_text()
