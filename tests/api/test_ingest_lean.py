"""The agents' ingest path made cheaper (docs/scaling.md): the token's row kept a few seconds per
process with revocations honoured within them, and ``POST /api/v1/telemetry`` past the
middleware it does not need (``api/lean.py``), with the same answers and headers."""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from django.conf import settings
from django.contrib.sessions.middleware import SessionMiddleware
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, connection, connections
from django.test import Client
from django.utils import timezone

from accelboard.api import lean, services
from accelboard.api.models import ApiToken
from accelboard.api.services import token_revoke
from accelboard.fleet.models import Host

from .conftest import post_json, row_counts, telemetry_payload

URL = "/api/v1/telemetry"


@pytest.fixture(autouse=True)
def _no_kept_tokens() -> Iterator[None]:
    services._verified.clear()
    yield
    services._verified.clear()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The monotonic clock the token cache reads; tests move ``clock[0]``."""
    now = [1_000.0]
    monkeypatch.setattr(services.time, "monotonic", lambda: now[0])
    return now


def _revoke_elsewhere(token: str) -> None:
    """A revocation by another process (the admin's, or ``accelboard token revoke`` on another
    machine): the row changes, this process's cache does not hear of it."""
    ApiToken.objects.filter(prefix=token[:8]).update(revoked_at=timezone.now())


def test_it_honours_a_revocation_made_elsewhere_within_the_cache_time(
    client: Client, team: Any, ingest_token: str, clock: list[float]
) -> None:
    first = post_json(client, URL, telemetry_payload(batch_id="kept-1"), ingest_token)
    assert first.status_code == 200, first.content
    _revoke_elsewhere(ingest_token)
    # Within TOKEN_CACHE_S of the read, the row this process verified still stands.
    clock[0] += services.TOKEN_CACHE_S - 0.5
    kept = post_json(client, URL, telemetry_payload(batch_id="kept-2", hostname="gpu-node-02"), ingest_token)
    assert kept.status_code == 200, kept.content
    # Once it has passed, the row is read again and the token refused, nothing stored.
    clock[0] += 0.5
    before = row_counts()
    refused = post_json(
        client, URL, telemetry_payload(batch_id="kept-3", hostname="gpu-node-03"), ingest_token
    )
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "token_revoked"
    assert row_counts() == before
    # And stays refused (a revoked row is not kept).
    again = post_json(client, URL, telemetry_payload(batch_id="kept-4", hostname="gpu-node-03"), ingest_token)
    assert again.status_code == 401


def test_a_revocation_in_this_process_is_honoured_at_once(
    client: Client, team: Any, ingest_token: str, clock: list[float]
) -> None:
    assert post_json(client, URL, telemetry_payload(batch_id="a"), ingest_token).status_code == 200
    token_revoke(prefix=ingest_token[:8])
    response = post_json(client, URL, telemetry_payload(batch_id="b"), ingest_token)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "token_revoked"


def test_a_kept_token_is_not_read_again(
    client: Client, team: Any, ingest_token: str, clock: list[float]
) -> None:
    calls: list[str] = []
    read = services._token_row

    def counted(*, prefix: str) -> ApiToken | None:
        calls.append(prefix)
        return read(prefix=prefix)

    services._token_row = counted  # type: ignore[assignment]
    try:
        for n in range(3):
            response = post_json(client, URL, telemetry_payload(batch_id=f"r{n}"), ingest_token)
            assert response.status_code == 200, response.content
        clock[0] += services.TOKEN_CACHE_S
        assert post_json(client, URL, telemetry_payload(batch_id="r3"), ingest_token).status_code == 200
    finally:
        services._token_row = read  # type: ignore[assignment]
    assert calls == [ingest_token[:8]] * 2
    # A wrong token is never kept: each try reads (and fails).
    wrong = ingest_token[:8] + "x" * 40
    for _ in range(2):
        assert post_json(client, URL, telemetry_payload(batch_id="w"), wrong).status_code == 401
    assert services._verified.keys() == {services._hash(ingest_token)}


def _wsgi(method: str, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """One request through ``accelboard.wsgi.application`` (what gunicorn calls), in the test's
    transaction: the connection-closing signal handlers are held off as Django's test client does."""
    from accelboard.wsgi import application

    environ = {
        "REQUEST_METHOD": method, "PATH_INFO": path, "SCRIPT_NAME": "", "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8000", "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": "127.0.0.1", "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body), "wsgi.url_scheme": "http", "wsgi.errors": sys.stderr,
        "wsgi.multithread": True, "wsgi.multiprocess": True, "wsgi.run_once": False,
        "REMOTE_ADDR": "127.0.0.1", **headers,
    }  # fmt: skip
    answer: list[Any] = []
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        content = b"".join(application(environ, lambda status, pairs, *_: answer.extend([status, pairs])))
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)
    return int(answer[0].split()[0]), dict(answer[1]), content


# The headers the full chain puts on an API answer, which the lean one must put on too.
SAME_HEADERS = ("Content-Type", "X-Frame-Options", "Content-Security-Policy", "X-Content-Type-Options",
                "Referrer-Policy", "Cross-Origin-Opener-Policy")  # fmt: skip


def test_the_lean_path_answers_as_the_full_one(
    team: Any, ingest_token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sessions: list[str] = []
    original = SessionMiddleware.process_request

    def seen(self: SessionMiddleware, request: Any) -> None:
        sessions.append(request.method)
        original(self, request)

    monkeypatch.setattr(SessionMiddleware, "process_request", seen)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {ingest_token}"}
    payload = telemetry_payload(n=6, batch_id="lean-1")
    status, headers, content = _wsgi("POST", URL, orjson.dumps(payload), auth)
    assert sessions == []  # the lean chain has no session middleware
    assert status == 200, content
    assert orjson.loads(content) == {
        "batch_id": "lean-1",
        "accepted": 6,
        "duplicate_samples": 0,
        "duplicate": False,
    }
    assert Host.objects.get(hostname="gpu-node-01").team_id == team.pk
    # The full chain (a GET of the same path: 405 there) sets the same headers.
    full_status, full_headers, _ = _wsgi("GET", URL, b"", auth)
    assert full_status == 405
    assert sessions == ["GET"]
    for name in SAME_HEADERS:
        if name == "Content-Type":
            continue
        assert headers.get(name) == full_headers.get(name), name
    assert headers["Content-Type"].startswith("application/json")
    assert headers["X-Frame-Options"] == "DENY"
    # A retry stores nothing twice.
    before = row_counts()
    status, _, content = _wsgi("POST", URL, orjson.dumps(payload), auth)
    assert status == 200 and orjson.loads(content)["duplicate"] is True
    assert row_counts() == before


@pytest.mark.parametrize(
    ("body", "auth", "status", "code"),
    [
        (b'{"batch_id": "x", "samples": [', True, 400, "malformed_json"),
        (orjson.dumps({**telemetry_payload(batch_id="bad"), "samples": [{"gpu": "nope"}]}), True, 422, None),
        (orjson.dumps(telemetry_payload(batch_id="anon")), False, 401, "unauthenticated"),
    ],
    ids=["malformed", "invalid-sample", "no-token"],
)
def test_the_lean_path_refuses_a_bad_batch_whole(
    team: Any, ingest_token: str, body: bytes, auth: bool, status: int, code: str | None
) -> None:
    before = row_counts()
    headers = {"HTTP_AUTHORIZATION": f"Bearer {ingest_token}"} if auth else {}
    got, _, content = _wsgi("POST", URL, body, headers)
    assert got == status, content
    error = orjson.loads(content)["error"]
    assert error["message"]
    if code is not None:
        assert error["code"] == code
    assert row_counts() == before


def test_the_lean_chain_keeps_only_middleware_the_settings_have() -> None:
    # A middleware renamed in settings must not silently leave the lean chain without it.
    assert set(lean.LEAN_MIDDLEWARE) <= set(settings.MIDDLEWARE)
    kept = [path for path in settings.MIDDLEWARE if path in lean.LEAN_MIDDLEWARE]
    assert kept == list(lean.LEAN_MIDDLEWARE)


def test_the_lean_path_skips_the_connection_health_check(
    team: Any, ingest_token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    checks: list[bool] = []
    wrapper = connections["default"]
    assert wrapper.health_check_enabled  # CONN_HEALTH_CHECKS
    monkeypatch.setattr(wrapper, "is_usable", lambda: checks.append(True) or True)
    connection.health_check_done = False
    auth = {"HTTP_AUTHORIZATION": f"Bearer {ingest_token}"}
    status, _, content = _wsgi("POST", URL, orjson.dumps(telemetry_payload(batch_id="hc")), auth)
    assert status == 200, content
    assert checks == []
    # Any other request checks its connection as before.
    connection.health_check_done = False
    with connection.cursor():
        pass
    assert checks == [True]
