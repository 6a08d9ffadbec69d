"""A real gunicorn with the image's configuration keeps an agent's connection between its posts
(``gunicorn_conf.keepalive`` longer than the agent's 10 s interval), and the settings that size
it (``GUNICORN_KEEPALIVE``, ``GUNICORN_WORKER_CONNECTIONS``)."""

from __future__ import annotations

import gzip
import http.client
import importlib
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from accelboard import gunicorn_conf
from accelboard.api.services import token_create
from accelboard.core.models import Team
from accelboard.fleet.models import TelemetrySample
from tests.api.conftest import telemetry_payload
from tests.test_request_limits import _serving

# The agent's interval between two posts (``send_interval`` of a 10 s batch).
AGENT_INTERVAL_S = 10.0


@pytest.fixture
def gunicorn(transactional_db: None, tmp_path: Path) -> Iterator[tuple[str, int]]:
    with _serving(tmp_path) as server:
        yield server


def _post(connection: http.client.HTTPConnection, token: str, batch_id: str) -> tuple[int, bytes, bool]:
    body = gzip.compress(orjson.dumps(telemetry_payload(batch_id=batch_id)))
    connection.request(
        "POST",
        "/api/v1/telemetry",
        body=body,
        headers={
            "Host": "127.0.0.1",
            "Content-Type": "application/json",
            "Content-Encoding": "gzip",
            "Authorization": f"Bearer {token}",
        },
    )
    response = connection.getresponse()
    return response.status, response.read(), response.will_close


def test_gunicorn_keeps_an_agents_connection_across_two_posts(gunicorn: tuple[str, int], team: Team) -> None:
    token = token_create(team=team, kind="ingest", name="agent")[1]
    connection = http.client.HTTPConnection(*gunicorn, timeout=30)
    try:
        status, _body, will_close = _post(connection, token, "keep-1")
        assert (status, will_close) == (200, False)
        sock = connection.sock
        # The agent's next post comes an interval later, on the same connection.
        time.sleep(AGENT_INTERVAL_S + 0.5)
        # A closed connection would make this raise (http.client does not reconnect a socket
        # the server closed while it was open).
        status, _body, will_close = _post(connection, token, "keep-2")
        assert (status, will_close) == (200, False)
        assert connection.sock is sock
    finally:
        connection.close()
    assert TelemetrySample.objects.count() == 2 * 4


def test_the_keepalive_and_connection_limit_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    assert gunicorn_conf.keepalive > AGENT_INTERVAL_S
    assert gunicorn_conf.worker_connections >= 4000
    monkeypatch.setenv("GUNICORN_KEEPALIVE", "45")
    monkeypatch.setenv("GUNICORN_WORKER_CONNECTIONS", "9000")
    try:
        reloaded = importlib.reload(gunicorn_conf)
        assert (reloaded.keepalive, reloaded.worker_connections) == (45, 9000)
    finally:
        monkeypatch.undo()
        importlib.reload(gunicorn_conf)
