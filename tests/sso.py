"""A real OpenID Connect provider for the single sign-on tests, and a sign-in through it.

``provider(...)`` starts ``tests/oidc_provider.py`` (django-oauth-toolkit, its own process,
SQLite database and port on 127.0.0.1) and yields its issuer URL; ``provider_sign_in`` walks the
provider's side of the authorization-code flow with ``requests`` (its login form, then the redirect
back) for tests that drive accelboard with Django's test client.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import requests

ROOT = Path(__file__).resolve().parents[1]
CLIENT_ID = "accelboard-test"
CLIENT_SECRET = "test-client-secret-0123456789"
USER_PASSWORD = "provider-password"
MAPPING = "perf-llm=llm:lead,perf-vision=vision:engineer,finops=*:finance"
# Who the provider knows, and their groups there.
USERS = [
    {"username": "ada", "email": "ada@example.org", "groups": ["perf-llm", "marketing"]},
    {"username": "grace", "email": "grace@example.org", "groups": ["perf-vision", "finops"]},
    {"username": "bob", "email": "bob@example.org", "groups": ["marketing", "sales"]},
]


@contextmanager
def provider(tmp_path: Path, *, redirect_uris: list[str], tamper: bool = False) -> Iterator[str]:
    users = [{**user, "password": USER_PASSWORD} for user in USERS]
    command = [
        sys.executable,
        # As a module from the checkout's root: run as a script, tests/ would come first on the
        # path and its numbers.py would hide the standard library's.
        "-m",
        "tests.oidc_provider",
        "--db",
        str(tmp_path / "provider.sqlite3"),
        "--client-id",
        CLIENT_ID,
        "--client-secret",
        CLIENT_SECRET,
        "--users",
        json.dumps(users),
        *[arg for uri in redirect_uris for arg in ("--redirect-uri", uri)],
    ]
    if tamper:
        command.append("--tamper")
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        if not line.startswith("issuer="):
            raise RuntimeError(f"the test provider did not start (exit {process.poll()}): {line!r}")
        yield line.removeprefix("issuer=")
    finally:
        process.terminate()
        process.wait(timeout=10)


def oidc_settings(settings: Any, issuer: str) -> None:
    """Point accelboard at the provider (pytest-django's ``settings`` fixture)."""
    settings.OIDC_ISSUER = issuer
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_GROUPS_CLAIM = "groups"
    settings.OIDC_GROUPS = MAPPING
    settings.OIDC_PROVIDER_NAME = "Test IdP"


def provider_sign_in(authorize_url: str, *, username: str, password: str = USER_PASSWORD) -> str:
    """Sign in at the provider from its authorization URL; the URL it sends the browser back to."""
    session = requests.Session()
    url = authorize_url
    for _ in range(10):
        response = session.get(url, allow_redirects=False, timeout=10)
        if response.status_code == 200 and 'name="password"' in response.text:
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', response.text)
            assert token is not None
            nxt = re.search(r'name="next" value="([^"]*)"', response.text)
            response = session.post(
                url,
                data={
                    "csrfmiddlewaretoken": token.group(1),
                    "username": username,
                    "password": password,
                    "next": nxt.group(1).replace("&amp;", "&") if nxt else "",
                },
                allow_redirects=False,
                timeout=10,
            )
        assert response.status_code in (301, 302), (response.status_code, response.text[:300])
        location = urljoin(url, response.headers["Location"])
        if not location.startswith(authorize_url.split("/o/")[0]):
            return location
        url = location
    raise AssertionError("the provider never sent the browser back")
