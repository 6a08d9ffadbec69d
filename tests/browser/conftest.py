"""Browser harness: Playwright's sync API driving Debian's Chromium against pytest-django's live server.

Fixtures:

- ``browser`` (session): one headless ``/usr/bin/chromium``; each ``launch()`` gets a fresh
  user-data-dir, so no profile state leaks between runs.
- ``page`` (per test): a new browser context (own cookies) on ``live_server``, closed after the
  test; ``page.network`` lists every request URL, ``page.js_errors`` every uncaught page error,
  ``page.console`` every console warning and error (Plotly warns there when it cannot draw).
- ``login(page, user)``: logs in through the real login form.
- ``screenshot(page, name)``: a full-page PNG under ``test-artifacts/screenshots/`` (git-ignored).

Where Chromium or Playwright is missing the tests are skipped with how to install them, unless
``ACCELBOARD_REQUIRE_BROWSER=1`` (CI), where a missing browser is a failure, not a silent pass.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.numbers import console_listen

# Playwright's sync API runs an event loop in the test thread; Django's async-safety check would
# then refuse every ORM call the test makes. The calls are in fact synchronous and safe.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
# Loopback by address, not "localhost": tests assert that no request leaves 127.0.0.1.
os.environ.setdefault("DJANGO_LIVE_TEST_SERVER_ADDRESS", "127.0.0.1")

# Debian's package; ACCELBOARD_CHROMIUM points elsewhere (another distribution, a test of the skip).
CHROMIUM = os.environ.get("ACCELBOARD_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
VIEWPORT = {"width": 1440, "height": 900}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Everything in this directory drives a browser, marked or not: `-m "not browser"` must skip it.
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).parent == here:
            item.add_marker(pytest.mark.browser)


def _browser_missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install playwright)"
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        return f"{CHROMIUM} is missing"
    return None


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    missing = _browser_missing()
    if missing:
        message = f"browser tests need Chromium: {missing}; apt-get install chromium"
        if os.environ.get("ACCELBOARD_REQUIRE_BROWSER") == "1":
            pytest.fail(f"ACCELBOARD_REQUIRE_BROWSER=1 but {message}", pytrace=False)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    try:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
    finally:
        playwright.stop()


@pytest.fixture(scope="session")
def live_server(live_server: Any, django_db_blocker: Any) -> Iterator[Any]:
    """pytest-django's live server, leaving no database session behind.

    pytest-django's ``DROP DATABASE`` of the test database fails while any other session is
    connected to it, and browser tests leave two kinds: keep-alive request threads holding their
    connection for ``CONN_MAX_AGE`` (set to 0 here), and, when ordinary ``django_db`` tests ran
    earlier in the session, a second connection of the test code itself that pytest-django does
    not close (Django keys connections by context; seen in pg_stat_activity, cause not pinned
    down). Both are ended here, before the test database is dropped.
    """
    from django.conf import settings
    from django.db import connection

    database = settings.DATABASES["default"]
    before = database.get("CONN_MAX_AGE", 0)
    database["CONN_MAX_AGE"] = 0
    try:
        yield live_server
    finally:
        database["CONN_MAX_AGE"] = before
        with django_db_blocker.unblock():
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            connection.close()


@pytest.fixture
def page(browser: Any, live_server: Any) -> Iterator[Any]:
    context = browser.new_context(base_url=live_server.url, viewport=VIEWPORT)
    # Fail fast rather than hang the suite on a page that never finishes.
    context.set_default_timeout(20_000)
    page = context.new_page()
    page.network = []
    page.js_errors = []
    page.on("request", lambda request: page.network.append(request.url))
    page.on("pageerror", lambda error: page.js_errors.append(str(error)))
    # Every page must work under the site's Content-Security-Policy: a blocked script, style or
    # eval is reported on the console, and fails the test that loaded the page.
    page.csp_violations = []
    page.on(
        "console",
        lambda message: (
            page.csp_violations.append(message.text)
            if message.type == "error" and "Content Security Policy" in message.text
            else None
        ),
    )
    page.console = console_listen(page)
    # Every file a page loads is there: a stylesheet, script, image or icon answering 4xx or 5xx
    # (the favicon's 404 once) fails the test. Documents are the tests' own business (a 404 page).
    page.failed_loads = []
    page.on(
        "response",
        lambda response: (
            page.failed_loads.append(f"{response.status} {response.url}")
            if response.status >= 400 and response.request.resource_type not in ("document", "fetch", "xhr")
            else None
        ),
    )
    try:
        yield page
        assert page.csp_violations == [], page.csp_violations
        assert page.failed_loads == [], page.failed_loads
    finally:
        context.close()


@pytest.fixture
def login(live_server: Any) -> Callable[[Any, Any], None]:
    """``login(page, user)``: fill in and submit the real login form, then land on the overview."""

    # Imported here: this module is also loaded as a plugin before Django is set up (test_harness).
    from tests.conftest import PASSWORD

    def do_login(page: Any, user: Any) -> None:
        page.goto("/accounts/login/")
        page.fill("#id_username", user.get_username())
        page.fill("#id_password", PASSWORD)
        with page.expect_navigation():
            page.click("button[type=submit]")
        assert "/accounts/login/" not in page.url, f"login as {user} failed: still on {page.url}"

    return do_login


@pytest.fixture
def screenshot() -> Callable[[Any, str], Path]:
    """``screenshot(page, name)``: save a full-page PNG and return its path."""

    def save(page: Any, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return save
