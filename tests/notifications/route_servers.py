"""Loopback HTTP servers that answer as Slack, PagerDuty, Teams and a webhook receiver do.

Each records every request (path, headers, body) and answers as the service documents:

- **Slack** incoming webhooks (api.slack.com/messaging/webhooks#handling_errors): ``200 ok``;
  ``404 no_service`` for an unknown hook path; ``400 invalid_payload`` for a body that is not
  JSON or has neither ``text`` nor ``blocks``, or whose blocks break Block Kit's limits (header
  text over 150 characters, more than 50 blocks, an unknown block type, a button without text
  or with an over-long URL); ``429`` with ``Retry-After`` when rate limited.
- **PagerDuty** Events API v2 (developer.pagerduty.com/docs/events-api-v2/overview):
  ``202 {"status":"success","message":"Event processed","dedup_key":...}``; ``400
  {"status":"invalid event","message":"Event object is invalid","errors":[...]}`` for a
  routing key that is not 32 characters, an unknown ``event_action``, a trigger without
  ``payload.summary``/``source``/``severity`` or with a severity outside critical, error,
  warning, info; ``429`` when throttled.
- **Teams** workflow webhook: ``202`` for a message whose attachment is an Adaptive Card,
  ``400`` otherwise.
- **Webhook** receiver: checks ``Accelboard-Signature`` with its secret (``401`` on a bad one).

``script`` queues answers to give instead (status, body, headers) before the normal ones.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from accelboard.notifications.route_payloads import SignatureError, signature_verify

SLACK_HOOK_PATH = "/services/T0001/B0001/XXXXXXXXXXXXXXXXXXXXXXXX"
SLACK_BLOCK_TYPES = {"header", "section", "image", "actions", "context", "divider", "rich_text"}
PD_SEVERITIES = {"critical", "error", "warning", "info"}


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class FakeService:
    kind: str  # slack | pagerduty | teams | webhook
    secret: str = ""
    requests: list[Recorded] = field(default_factory=list)
    script: list[tuple[int, str, dict[str, str]]] = field(default_factory=list)
    port: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def answer(self, path: str, headers: dict[str, str], body: bytes) -> tuple[int, str, dict[str, str]]:
        with self.lock:
            self.requests.append(Recorded(path, headers, body))
            if self.script:
                return self.script.pop(0)
        return getattr(self, f"_{self.kind}")(path, headers, body)

    def _slack(self, path: str, headers: dict[str, str], body: bytes) -> tuple[int, str, dict[str, str]]:
        if path != SLACK_HOOK_PATH:
            return 404, "no_service", {}
        try:
            data = json.loads(body)
        except ValueError:
            return 400, "invalid_payload", {}
        if not isinstance(data, dict) or not (data.get("text") or data.get("blocks")):
            return 400, "invalid_payload", {}
        blocks = data.get("blocks", [])
        if len(blocks) > 50:
            return 400, "invalid_blocks", {}
        for block in blocks:
            kind = block.get("type")
            if kind not in SLACK_BLOCK_TYPES:
                return 400, "invalid_blocks", {}
            if kind == "header" and len(block["text"]["text"]) > 150:
                return 400, "invalid_blocks", {}
            if kind == "section" and len(block["text"]["text"]) > 3000:
                return 400, "invalid_blocks", {}
            if kind == "actions":
                for element in block["elements"]:
                    if not element.get("text", {}).get("text") or len(element.get("url", "")) > 3000:
                        return 400, "invalid_blocks", {}
            if kind == "image" and not (block.get("image_url") and block.get("alt_text")):
                return 400, "invalid_blocks", {}
        return 200, "ok", {}

    def _pagerduty(self, path: str, headers: dict[str, str], body: bytes) -> tuple[int, str, dict[str, str]]:
        def invalid(error: str) -> tuple[int, str, dict[str, str]]:
            return (
                400,
                json.dumps(
                    {"status": "invalid event", "message": "Event object is invalid", "errors": [error]}
                ),
                {},
            )

        try:
            event = json.loads(body)
        except ValueError:
            return invalid("Invalid JSON")
        if len(event.get("routing_key", "")) != 32:
            return invalid("'routing_key' must be 32 characters")
        action = event.get("event_action")
        if action not in ("trigger", "acknowledge", "resolve"):
            return invalid("'event_action' is invalid")
        if action == "trigger":
            payload = event.get("payload") or {}
            for name in ("summary", "source", "severity"):
                if not payload.get(name):
                    return invalid(f"'payload.{name}' is missing or blank")
            if payload["severity"] not in PD_SEVERITIES:
                return invalid("'payload.severity' is invalid")
        elif not event.get("dedup_key"):
            return invalid("'dedup_key' is required for resolve")
        answer = {"status": "success", "message": "Event processed", "dedup_key": event.get("dedup_key", "x")}
        return 202, json.dumps(answer), {}

    def _teams(self, path: str, headers: dict[str, str], body: bytes) -> tuple[int, str, dict[str, str]]:
        try:
            data = json.loads(body)
            card = data["attachments"][0]
            ok = (
                card["contentType"] == "application/vnd.microsoft.card.adaptive"
                and card["content"]["type"] == "AdaptiveCard"
            )
        except (ValueError, KeyError, IndexError, TypeError):
            ok = False
        return (202, "", {}) if ok else (400, '{"error":{"code":"InvalidRequestContent"}}', {})

    def _webhook(self, path: str, headers: dict[str, str], body: bytes) -> tuple[int, str, dict[str, str]]:
        try:
            signature_verify(
                secret=self.secret, body=body, header=headers.get("accelboard-signature", ""), now=time.time()
            )
        except SignatureError as exc:
            return 401, str(exc), {}
        return 204, "", {}


def _handler(service: FakeService) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, text, extra = service.answer(self.path, headers, body)
            data = text.encode()
            self.send_response(status)
            for name, value in extra.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Content-Type", "application/json" if text.startswith("{") else "text/html")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
            return

    return Handler


def serve(service: FakeService) -> Iterator[FakeService]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(service))
    service.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield service
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def slack() -> Iterator[FakeService]:
    yield from serve(FakeService("slack"))


@pytest.fixture
def pagerduty() -> Iterator[FakeService]:
    yield from serve(FakeService("pagerduty"))


@pytest.fixture
def teams() -> Iterator[FakeService]:
    yield from serve(FakeService("teams"))


@pytest.fixture
def webhook_receiver() -> Iterator[FakeService]:
    yield from serve(FakeService("webhook"))
