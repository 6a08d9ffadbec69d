"""The agents' ingest path made cheaper (docs/scaling.md): the token's row kept a few seconds per
process with revocations honoured within them, and ``POST /api/v1/telemetry`` past the
middleware it does not need (``api/lean.py``), with the same answers and headers."""

from __future__ import annotations

import gzip
import io
import sys
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
from django.conf import settings
from django.contrib.sessions.middleware import SessionMiddleware
from django.core.signals import got_request_exception, request_finished, request_started
from django.db import OperationalError, close_old_connections, connection, connections
from django.test import Client
from django.utils import timezone
from ninja.operation import Operation

from accelboard.api import lean, services
from accelboard.api.models import ApiToken
from accelboard.api.services import token_revoke
from accelboard.core import readiness
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


def _wsgi(
    method: str,
    path: str,
    body: bytes,
    headers: dict[str, str],
    *,
    full: bool = False,
    lean_chain: bool = False,
    hold: bool = True,
) -> tuple[int, dict[str, str], bytes]:
    """One request through ``accelboard.wsgi.application`` (what gunicorn calls; ``full``: Django's
    own handler with the whole middleware chain, URL resolution and ninja; ``lean_chain``: the
    lean chain with URL resolution and ninja, as before the direct path), in the test's
    transaction: the connection-closing signal handlers are held off as Django's test client does."""
    from accelboard.wsgi import application, django_application

    environ = {
        "REQUEST_METHOD": method, "PATH_INFO": path, "SCRIPT_NAME": "", "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8000", "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": "127.0.0.1", "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body), "wsgi.url_scheme": "http", "wsgi.errors": sys.stderr,
        "wsgi.multithread": True, "wsgi.multiprocess": True, "wsgi.run_once": False,
        "REMOTE_ADDR": "127.0.0.1", **headers,
    }  # fmt: skip
    answer: list[Any] = []
    if hold:
        request_started.disconnect(close_old_connections)
        request_finished.disconnect(close_old_connections)
    try:
        app = django_application if full else _LEAN_CHAIN if lean_chain else application
        response = app(environ, lambda status, pairs, *_: answer.extend([status, pairs]))
        content = b"".join(response)
        getattr(response, "close", lambda: None)()  # as the server does: request_finished
    finally:
        if hold:
            request_started.connect(close_old_connections)
            request_finished.connect(close_old_connections)
    return int(answer[0].split()[0]), dict(answer[1]), content


_LEAN_CHAIN = lean.ingest_dispatch(lambda environ, start_response: [], direct=False)

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


# --- The direct path (``views.telemetry_direct``) against the full chain -------------------------

Build = Callable[[str, dict[str, str]], tuple[bytes, dict[str, str]]]


def _bearer(token: str, **more: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}", **more}


def _batch(tag: str, **changes: Any) -> dict[str, Any]:
    return {**telemetry_payload(n=6, batch_id=f"{tag}-b", hostname=f"{tag}-host"), **changes}


# Each case builds its request from a tag ("direct" or "full": its own batch ids and hosts, so
# that both paths store what they are sent) and the tokens by kind; the answers must be equal
# once the tag is replaced.
CASES: list[tuple[str, Build, int]] = [
    ("ok", lambda tag, t: (orjson.dumps(_batch(tag)), _bearer(t["ingest"])), 200),
    (
        "ok-gzip",
        lambda tag, t: (
            gzip.compress(orjson.dumps(_batch(tag))),
            _bearer(t["ingest"], HTTP_CONTENT_ENCODING="gzip"),
        ),
        200,
    ),
    ("malformed", lambda tag, t: (b'{"batch_id": "x", "samples": [', _bearer(t["ingest"])), 400),
    (
        "bad-gzip",
        lambda tag, t: (b"\x1f\x8bnot gzip", _bearer(t["ingest"], HTTP_CONTENT_ENCODING="gzip")),
        400,
    ),
    (
        "duplicate-key",
        lambda tag, t: (orjson.dumps(_batch(tag))[:-1] + b',"batch_id":"again"}', _bearer(t["ingest"])),
        400,
    ),
    ("no-token", lambda tag, t: (orjson.dumps(_batch(tag)), {}), 401),
    ("wrong-token", lambda tag, t: (orjson.dumps(_batch(tag)), _bearer(t["ingest"][:8] + "x" * 40)), 401),
    ("short-token", lambda tag, t: (orjson.dumps(_batch(tag)), _bearer("abc")), 401),
    (
        "basic-scheme",
        lambda tag, t: (orjson.dumps(_batch(tag)), {"HTTP_AUTHORIZATION": f"Basic {t['ingest']}"}),
        401,
    ),
    ("revoked", lambda tag, t: (orjson.dumps(_batch(tag)), _bearer(t["revoked"])), 401),
    ("read-token", lambda tag, t: (orjson.dumps(_batch(tag)), _bearer(t["read"])), 403),
    (
        "reused-id",
        lambda tag, t: (orjson.dumps(_batch("first", batch_id="first-b")), _bearer(t["ingest"])),
        409,
    ),
    ("too-large", lambda tag, t: (b"{}", _bearer(t["ingest"], CONTENT_LENGTH=str(40 * 1024 * 1024))), 413),
    (
        "content-type",
        lambda tag, t: (orjson.dumps(_batch(tag)), _bearer(t["ingest"], CONTENT_TYPE="text/plain")),
        415,
    ),
    (
        "encoding",
        lambda tag, t: (orjson.dumps(_batch(tag)), _bearer(t["ingest"], HTTP_CONTENT_ENCODING="br")),
        415,
    ),
    (
        "invalid-sample",
        lambda tag, t: (orjson.dumps(_batch(tag, samples=[{"gpu": "nope"}])), _bearer(t["ingest"])),
        422,
    ),
    (
        "too-deep",
        lambda tag, t: (b'{"batch_id": ' + b"[" * 120 + b"]" * 120 + b"}", _bearer(t["ingest"])),
        422,
    ),
    ("nul", lambda tag, t: (orjson.dumps(_batch(tag, batch_id="a\x00b")), _bearer(t["ingest"])), 422),
    ("uri-too-long", lambda tag, t: (b"{}", _bearer(t["ingest"], QUERY_STRING="q=" + "x" * 5000)), 414),
    ("header-too-large", lambda tag, t: (b"{}", _bearer(t["ingest"], HTTP_X_PADDING="x" * 9000)), 431),
]


@pytest.fixture
def tokens(team: Any, ingest_token: str, read_token: str, make_token: Callable[..., str]) -> dict[str, str]:
    revoked = make_token(team, "ingest")
    token_revoke(prefix=revoked[:8])
    return {"ingest": ingest_token, "read": read_token, "revoked": revoked}


def _answer(
    tag: str, build: Build, tokens: dict[str, str], **path: bool
) -> tuple[int, dict[str, str], bytes]:
    body, headers = build(tag, tokens)
    status, got, content = _wsgi("POST", URL, body, headers, **path)
    return status, got, content.replace(tag.encode(), b"TAG")


# What only the full chain adds: CommonMiddleware's Content-Length (gunicorn sends the lean
# answers chunked) and the session middleware's Vary: Cookie; the lean chain never had them.
FULL_ONLY = {"Content-Length", "Vary"}


@pytest.mark.parametrize(("case", "build", "status"), CASES, ids=[case[0] for case in CASES])
def test_the_direct_path_answers_as_the_full_chain(
    tokens: dict[str, str], case: str, build: Build, status: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    if case == "reused-id":  # a batch id first sent with other samples
        first = orjson.dumps(telemetry_payload(n=2, batch_id="first-b", hostname="first-host"))
        assert _wsgi("POST", URL, first, _bearer(tokens["ingest"]))[0] == 200
    before = row_counts()
    dispatched: list[str] = []
    run = Operation.run

    def counted(self: Operation, request: Any, **kw: Any) -> Any:
        dispatched.append(request.path)
        return run(self, request, **kw)

    monkeypatch.setattr(Operation, "run", counted)
    direct = _answer("direct", build, tokens)
    assert dispatched == []  # no URL resolution nor ninja on the direct path
    stored = row_counts()
    full = _answer("full", build, tokens, full=True)
    chain = _answer("chain", build, tokens, lean_chain=True)
    assert dispatched == [URL, URL] or status in (414, 431)  # answered by the chain's first middleware
    assert direct[0] == full[0] == chain[0] == status, (direct, full)
    assert direct[2] == full[2] == chain[2]  # byte for byte, the tag aside
    assert direct[1] == chain[1]  # every header, the same as the lean chain's
    assert direct[1] == {name: value for name, value in full[1].items() if name not in FULL_ONLY}
    if status == 200:
        assert orjson.loads(direct[2])["accepted"] > 0
        assert before != stored != row_counts()
    else:  # refused whole, on either path
        assert orjson.loads(direct[2])["error"]["message"]
        assert stored == before and row_counts() == before


def test_the_direct_path_answers_a_retry_as_the_full_chain(tokens: dict[str, str]) -> None:
    body = orjson.dumps(telemetry_payload(n=4, batch_id="retry-b", hostname="retry-host"))
    assert _wsgi("POST", URL, body, _bearer(tokens["ingest"]))[0] == 200
    before = row_counts()
    direct = _wsgi("POST", URL, body, _bearer(tokens["ingest"]))
    full = _wsgi("POST", URL, body, _bearer(tokens["ingest"]), full=True)
    assert direct[0] == full[0] and direct[2] == full[2]
    assert direct[1] == {name: value for name, value in full[1].items() if name not in FULL_ONLY}
    assert direct[0] == 200 and orjson.loads(direct[2])["duplicate"] is True
    assert row_counts() == before  # a retry stores nothing twice


def test_the_direct_path_says_starting_until_migrated(
    tokens: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(readiness, "pending_migrations", lambda: 2)
    readiness.readiness_reset()
    try:
        body = orjson.dumps(telemetry_payload(n=2, batch_id="early"))
        before = row_counts()
        direct = _wsgi("POST", URL, body, _bearer(tokens["ingest"]))
        full = _wsgi("POST", URL, body, _bearer(tokens["ingest"]), full=True)
    finally:
        readiness.readiness_reset(ready=True)
    assert direct[0] == full[0] and direct[2] == full[2]
    assert direct[1] == {name: value for name, value in full[1].items() if name not in FULL_ONLY}
    assert direct[0] == 503 and direct[1]["Retry-After"] == "2"
    assert orjson.loads(direct[2])["error"]["code"] == "starting"
    assert row_counts() == before


def test_the_direct_path_answers_a_failure_as_the_full_chain_and_runs_the_request_signals(
    tokens: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(**kwargs: Any) -> Any:
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(services, "telemetry_batch_ingest", broken)
    seen: list[str] = []

    def started(**kwargs: Any) -> None:
        seen.append("started")

    def finished(**kwargs: Any) -> None:
        seen.append("finished")

    def failed(**kwargs: Any) -> None:
        seen.append("exception")

    request_started.connect(started)
    request_finished.connect(finished)
    got_request_exception.connect(failed)
    try:
        body = orjson.dumps(telemetry_payload(n=2, batch_id="broken"))
        direct = _wsgi("POST", URL, body, _bearer(tokens["ingest"]))
        assert seen == ["started", "exception", "finished"]
        full = _wsgi("POST", URL, body, _bearer(tokens["ingest"]), full=True)
    finally:
        request_started.disconnect(started)
        request_finished.disconnect(finished)
        got_request_exception.disconnect(failed)
    assert direct[0] == full[0] and direct[2] == full[2]
    assert direct[1] == {name: value for name, value in full[1].items() if name not in FULL_ONLY}
    assert direct[0] == 500 and orjson.loads(direct[2])["error"]["code"] == "server_error"


def test_a_broken_connection_is_closed_after_the_direct_paths_500(
    tokens: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # request_finished's close_old_connections closes a connection whose queries failed and that
    # no longer answers (the test's transaction keeps it open: the check is asked, not obeyed).
    def broken(**kwargs: Any) -> Any:
        connection.errors_occurred = True  # as Django's DatabaseErrorWrapper marks it
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(services, "telemetry_batch_ingest", broken)
    closed: list[bool] = []
    monkeypatch.setattr(
        type(connections["default"]),
        "close_if_unusable_or_obsolete",
        lambda self: closed.append(self.errors_occurred),
    )
    body = orjson.dumps(telemetry_payload(n=2, batch_id="broken"))
    status, _, _ = _wsgi("POST", URL, body, _bearer(tokens["ingest"]), hold=False)
    assert status == 500
    assert closed[-1] is True  # at the request's end, with the errors seen
