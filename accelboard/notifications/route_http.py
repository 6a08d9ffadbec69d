"""One POST to a channel, and the answer kept for the delivery log (standard library, no ORM).

1. With ``public_only``, the host is resolved first and every address it has must be public
   (``route_payloads.address_is_public``); the request then goes to the first such address, with
   the URL's host name in ``Host`` (and in TLS's SNI and certificate check), so a DNS answer that
   changes between the check and the connection cannot point it inward.
2. Redirects are not followed: a webhook that answers 3xx is an answer, not a hop inward.
3. ``RouteAnswer.transient``: 429, 5xx and a failed connection are worth retrying; other 4xx
   (Slack's 400 invalid_payload, 404 no_service, PagerDuty's 400) are not. ``retry_after`` is
   the answer's ``Retry-After`` in seconds, when it gave one.
"""

from __future__ import annotations

import http.client
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from .route_payloads import TargetError, address_is_public

RESPONSE_BODY_MAX = 2000
USER_AGENT = "accelboard-alert-routes/1"


@dataclass(frozen=True)
class RouteAnswer:
    status: int | None  # None: no HTTP answer (connection refused, timeout, TLS failure)
    body: str
    retry_after: float | None = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    @property
    def transient(self) -> bool:
        return self.status is None or self.status == 429 or self.status >= 500


def retry_after_seconds(value: str | None) -> float | None:
    """``Retry-After`` in seconds (the delta form; an HTTP date is read as no hint)."""
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def resolve_public(host: str, port: int, *, field: str = "url") -> str:
    """The first address of ``host``; ``TargetError`` if any of its addresses is not public."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise TargetError(field, f"The host {host!r} cannot be resolved ({exc}).") from None
    addresses = [str(info[4][0]) for info in infos]
    private = [a for a in addresses if not address_is_public(a)]
    if private or not addresses:
        raise TargetError(
            field,
            f"The host {host!r} resolves to a loopback, link-local or private address "
            f"({', '.join(private) or 'none'}); routes may only reach public addresses.",
        )
    return addresses[0]


class _PinnedHTTPS(http.client.HTTPSConnection):
    """HTTPS to a resolved address, with SNI and the certificate checked for the host name."""

    def __init__(self, host: str, address: str, port: int, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self._address = address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


class _PinnedHTTP(http.client.HTTPConnection):
    def __init__(self, host: str, address: str, port: int, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


def post_json(
    url: str, body: bytes, *, headers: dict[str, str] | None = None, timeout: float, public_only: bool
) -> RouteAnswer:
    """POST ``body`` (JSON) to ``url``. Raises ``TargetError`` when ``public_only`` refuses the
    host; every network failure is an answer with ``status`` None."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    address = resolve_public(host, port) if public_only else host
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    connection_class = _PinnedHTTPS if parts.scheme == "https" else _PinnedHTTP
    connection = connection_class(host, address, port, timeout)
    all_headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT, **(headers or {})}
    try:
        connection.request("POST", path, body=body, headers=all_headers)
        response = connection.getresponse()
        text = response.read(RESPONSE_BODY_MAX * 4).decode("utf-8", "replace")[:RESPONSE_BODY_MAX]
        return RouteAnswer(
            status=response.status,
            body=text,
            retry_after=retry_after_seconds(response.getheader("Retry-After")),
        )
    except (OSError, http.client.HTTPException) as exc:
        return RouteAnswer(status=None, body="", error=f"{type(exc).__name__}: {exc}"[:RESPONSE_BODY_MAX])
    finally:
        connection.close()
