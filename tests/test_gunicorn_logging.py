"""The web workers' access log (``gunicorn_logging.AccessLogger``, ``gunicorn_conf.logger_class``):
gunicorn's line, byte for byte, without building every atom."""

from __future__ import annotations

import base64
import logging
import socket
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from gunicorn.config import Config
from gunicorn.glogging import Logger
from gunicorn.http import get_parser, wsgi

from accelboard import gunicorn_conf
from accelboard.gunicorn_logging import AccessLogger

AGENT_HEADERS = (
    b"Authorization: Bearer abcdefgh0123456789abcdefgh0123456789\r\n"
    b"Content-Type: application/json\r\nContent-Encoding: gzip\r\n"
    b"User-Agent: accelboard-agent/1.4\r\nAccept-Encoding: identity\r\nConnection: close\r\n"
)
REQUESTS = [
    b"POST /api/v1/telemetry HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    + AGENT_HEADERS
    + b"Content-Length: 2\r\n\r\n{}",
    # A user name (Basic), quotes in the referer and user agent, a query string.
    b"GET /fleet/?host=%22a%22&x=1 HTTP/1.1\r\nHost: h\r\nAuthorization: Basic "
    + base64.b64encode(b'ann"x:secret')
    + b'\r\nReferer: http://h/"q"\r\nUser-Agent: say "hi"\r\n\r\n',
    # No user agent, no referer, a broken Basic header, HTTP/1.0.
    b"GET /healthz HTTP/1.0\r\nAuthorization: Basic !!!\r\n\r\n",
]
# (status as the application gave it, body bytes written: None when nothing was sent)
ANSWERS = [("200 OK", 123), ("401 Unauthorized", 0), ("503 Service Unavailable", None)]


@pytest.fixture(autouse=True)
def _access_log_as_found() -> Iterator[None]:
    """gunicorn's access log is one logging logger (``gunicorn.access``) for every ``Logger``
    made: each test starts it bare and leaves it as it found it."""
    access = logging.getLogger("gunicorn.access")
    handlers, propagate = access.handlers[:], access.propagate
    access.handlers = []
    yield
    access.handlers, access.propagate = handlers, propagate


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _logger(cls: type[Logger], access_log_format: str | None = None) -> tuple[Logger, _Lines]:
    """A logger of ``cls`` whose access lines go to the returned list (the access log is one
    logging logger, ``gunicorn.access``: make one, use it, then the next)."""
    cfg = Config()
    cfg.set("accesslog", "-")
    if access_log_format is not None:
        cfg.set("access_log_format", access_log_format)
    log = cls(cfg)
    log.now = lambda: "[08/Dec/2026:00:10:00 +0000]"  # type: ignore[method-assign]  # one clock for both
    lines = _Lines()
    log.access_log.handlers = [lines]
    log.access_log.propagate = False
    return log, lines


def _line(
    cls: type[Logger], resp: Any, req: Any, environ: dict[str, Any], fmt: str | None = None
) -> list[str]:
    log, lines = _logger(cls, fmt)
    log.access(resp, req, environ, timedelta(seconds=1, microseconds=234_567))
    return lines.lines


def _request(raw: bytes) -> tuple[Any, Any, dict[str, Any]]:
    """gunicorn's own request, response and environ for ``raw``, parsed off a socket."""
    server, client = socket.socketpair()
    with server, client:
        client.sendall(raw)
        client.shutdown(socket.SHUT_WR)
        cfg = Config()
        req = next(get_parser(cfg, server, ("127.0.0.1", 50123)))
        resp, environ = wsgi.create(req, server, ("127.0.0.1", 50123), ("127.0.0.1", 8000), cfg)
    return req, resp, environ


@pytest.mark.parametrize("raw", REQUESTS)
@pytest.mark.parametrize(("status", "sent"), ANSWERS)
def test_it_writes_gunicorns_access_line(raw: bytes, status: str, sent: int | None) -> None:
    req, resp, environ = _request(raw)
    resp.status = status
    resp.sent = sent
    resp.headers = [("Content-Type", "application/json"), ("X-Frame-Options", "DENY")]
    ours = _line(AccessLogger, resp, req, environ)
    assert ours == _line(Logger, resp, req, environ)
    assert len(ours) == 1


def test_it_does_not_build_every_atom_for_the_default_format(monkeypatch: pytest.MonkeyPatch) -> None:
    req, resp, environ = _request(REQUESTS[0])
    resp.status, resp.sent = "200 OK", 45
    ours, lines = _logger(AccessLogger)

    def atoms(*args: Any) -> dict[str, Any]:
        raise AssertionError("every atom built")

    monkeypatch.setattr(ours, "atoms", atoms)
    ours.access(resp, req, environ, timedelta(milliseconds=12))
    assert lines.lines == [
        '127.0.0.1 - - [08/Dec/2026:00:10:00 +0000] "POST /api/v1/telemetry HTTP/1.1" 200 45 "-" '
        '"accelboard-agent/1.4"'
    ]


def test_another_format_is_gunicorns_own() -> None:
    req, resp, environ = _request(REQUESTS[0])
    resp.status, resp.sent = "200 OK", 45
    resp.headers = [("Content-Type", "application/json")]
    fmt = '%(h)s "%({content-type}o)s" "%({user-agent}i)s" %(D)s %(p)s %({raw_uri}e)s'
    ours = _line(AccessLogger, resp, req, environ, fmt)
    assert ours == _line(Logger, resp, req, environ, fmt)
    assert '"application/json" "accelboard-agent/1.4"' in ours[0]


def test_the_workers_use_it() -> None:
    cfg = Config()
    cfg.set("logger_class", gunicorn_conf.logger_class)
    assert cfg.logger_class is AccessLogger


def test_nothing_is_written_without_an_access_log() -> None:
    req, resp, environ = _request(REQUESTS[0])
    resp.status, resp.sent = "200 OK", 45
    ours = AccessLogger(Config())  # accesslog unset: gunicorn writes no access line
    lines = _Lines()
    ours.access_log.handlers = [lines]
    ours.access(resp, req, environ, timedelta(milliseconds=12))
    assert lines.lines == []


def _file_lines(cls: type[Logger], path: Path, resp: Any, req: Any, environ: dict[str, Any]) -> bytes:
    """What ``cls`` writes to an access log file (gunicorn's own handler and formatter)."""
    cfg = Config()
    cfg.set("accesslog", str(path))
    log = cls(cfg)
    log.now = lambda: "[08/Dec/2026:00:10:00 +0000]"  # type: ignore[method-assign]
    try:
        for _ in range(3):
            log.access(resp, req, environ, timedelta(milliseconds=12))
    finally:
        for handler in log.access_log.handlers:
            handler.close()
        log.access_log.handlers = []
    return path.read_bytes()


@pytest.mark.parametrize("raw", REQUESTS)
def test_it_writes_the_same_bytes_to_the_access_file(raw: bytes, tmp_path: Path) -> None:
    req, resp, environ = _request(raw)
    resp.status, resp.sent = "200 OK", 45
    resp.headers = [("Content-Type", "application/json")]
    theirs = _file_lines(Logger, tmp_path / "theirs.log", resp, req, environ)
    ours = _file_lines(AccessLogger, tmp_path / "ours.log", resp, req, environ)
    assert ours == theirs
    assert ours.count(b"\n") == 3


def test_it_writes_the_file_without_a_log_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    req, resp, environ = _request(REQUESTS[0])
    resp.status, resp.sent = "200 OK", 45

    def make_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        raise AssertionError("a LogRecord made")

    monkeypatch.setattr(logging.getLogger("gunicorn.access"), "makeRecord", make_record)
    written = _file_lines(AccessLogger, tmp_path / "ours.log", resp, req, environ)
    assert written.count(b'"POST /api/v1/telemetry HTTP/1.1" 200 45') == 3


def test_a_filtered_access_log_goes_through_logging(tmp_path: Path) -> None:
    req, resp, environ = _request(REQUESTS[0])
    resp.status, resp.sent = "200 OK", 45
    seen: list[str] = []

    def keep(record: logging.LogRecord) -> bool:
        seen.append(record.getMessage())
        return False  # and drops it

    access = logging.getLogger("gunicorn.access")
    access.addFilter(keep)
    try:
        written = _file_lines(AccessLogger, tmp_path / "ours.log", resp, req, environ)
    finally:
        access.removeFilter(keep)
    assert written == b""
    assert len(seen) == 3


def test_the_production_access_log_on_stdout_is_written_directly() -> None:
    cfg = Config()
    cfg.set("accesslog", gunicorn_conf.accesslog)  # "-": stdout
    assert AccessLogger(cfg)._plain_handler() is not None
