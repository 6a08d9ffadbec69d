"""gunicorn's access log line, written without building every atom (``gunicorn_conf.logger_class``).

gunicorn's ``Logger.access`` builds a dict of every atom a format could name for each request:
~20 fixed ones, one per request header, one per response header and one per environ variable
(~60 for an agent's post), then copies it through ``SafeAtoms``, escaping each string. The
default format names nine of them. For an agent's telemetry post that was ~0.2 ms of a worker's
CPU, about a twentieth of the batch's (docs/scaling.md, issue 37). ``AccessLogger`` writes the
same line from those nine alone when the format is gunicorn's default, with the same values and
the same escaping; any other ``access_log_format`` goes through gunicorn's own ``access``.
"""

from __future__ import annotations

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
            self.access_log.info(DEFAULT_FORMAT, safe)
        except Exception:  # as gunicorn's ``access``: a line that cannot be written is reported
            self.error(traceback.format_exc())
