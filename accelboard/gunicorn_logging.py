"""gunicorn's access log line, written without building every atom (``gunicorn_conf.logger_class``).

gunicorn's ``Logger.access`` builds a dict of every atom a format could name for each request:
~20 fixed ones, one per request header, one per response header and one per environ variable
(~80 for an agent's post), then copies it through ``SafeAtoms``, escaping each string, and
writes the line through ``logging`` (a ``LogRecord``). The default format names nine atoms. For
an agent's telemetry post that was ~0.2 ms of a worker's CPU, about a twentieth of the batch's
(docs/scaling.md, issue 37). ``AccessLogger`` writes the same line from those nine alone when the
format is gunicorn's default, with the same values and the same escaping, straight to the access
log's stream when that is all its handler would do (``_plain_handler``); any other
``access_log_format`` goes through gunicorn's own ``access``.
"""

from __future__ import annotations

import logging
import traceback
from datetime import timedelta
from typing import Any

from gunicorn.config import AccessLogFormat
from gunicorn.glogging import Logger

DEFAULT_FORMAT = AccessLogFormat.default


def _safe(value: str) -> str:
    """As ``gunicorn.glogging.SafeAtoms`` writes a string atom."""
    return value.replace('"', '\\"')


class AccessLogger(Logger):
    """gunicorn's ``Logger`` whose access line in the default format is built from the atoms the
    format names (the same line, byte for byte; tests/test_gunicorn_logging.py)."""

    def access(self, resp: Any, req: Any, environ: dict[str, Any], request_time: timedelta) -> None:
        if not self.access_log_enabled:
            return
        if self.cfg.access_log_format != DEFAULT_FORMAT:
            super().access(resp, req, environ, request_time)
            return
        status = resp.status
        if isinstance(status, str):
            status = status.split(None, 1)[0]
        sent = getattr(resp, "sent", None)
        atoms = {
            "h": environ.get("REMOTE_ADDR", "-"),
            "l": "-",
            "u": self._get_user(environ) or "-",
            "t": self.now(),
            "r": f"{environ['REQUEST_METHOD']} {environ['RAW_URI']} {environ['SERVER_PROTOCOL']}",
            "s": status,
            "b": sent is not None and str(sent) or "-",
            "f": environ.get("HTTP_REFERER", "-"),
            "a": environ.get("HTTP_USER_AGENT", "-"),
        }
        safe = {key: _safe(value) if isinstance(value, str) else value for key, value in atoms.items()}
        try:
            handler = self._plain_handler()
            if handler is None:
                self.access_log.info(DEFAULT_FORMAT, safe)
                return
            handler.acquire()  # as ``StreamHandler.emit`` writes a record's message
            try:
                handler.stream.write(DEFAULT_FORMAT % safe + handler.terminator)
                handler.flush()
            finally:
                handler.release()
        except Exception:  # as gunicorn's ``access``: a line that cannot be written is reported
            self.error(traceback.format_exc())

    def _plain_handler(self) -> logging.StreamHandler[Any] | None:
        """The access log's one handler when it only writes each message as it is to a stream
        (gunicorn's ``--access-logfile``: a file or stdout, the format ``%(message)s``, no
        filters): the line is written there without a ``LogRecord`` (~half of the rest of
        ``access``'s cost). None otherwise (a ``logconfig``, syslog, a filter): through logging."""
        log = self.access_log
        if log.filters or log.propagate or len(log.handlers) != 1 or not log.isEnabledFor(logging.INFO):
            return None
        handler = log.handlers[0]
        formatter = handler.formatter
        if (
            type(handler) not in (logging.StreamHandler, logging.FileHandler)
            or handler.filters
            or handler.level > logging.INFO
            or type(formatter) is not logging.Formatter
            or formatter._fmt != "%(message)s"
        ):
            return None
        assert isinstance(handler, logging.StreamHandler)  # checked above (a FileHandler is one)
        return handler if handler.stream is not None else None
