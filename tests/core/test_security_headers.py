"""Every page carries a Content-Security-Policy that allows only this site's scripts and styles
(the browser tests check that the pages, Plotly included, draw under it without a violation)."""

from __future__ import annotations

from typing import Any

from django.test import Client


def test_every_response_carries_the_content_security_policy(lead: Any, login_client: Any) -> None:
    for response in (login_client(lead).get("/"), Client().get("/accounts/login/"), Client().get("/healthz")):
        policy = response["Content-Security-Policy"]
        directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
        assert directives["script-src"] == "'self'"  # no inline code, no eval, no CDN
        assert directives["default-src"] == "'self'"
        assert directives["object-src"] == "'none'" and directives["frame-ancestors"] == "'none'"
