"""The API's docs page works under the product's own rules: Swagger UI from this site's static
files (no CDN, which the Content Security Policy blocks and an offline site cannot reach), drawn
with the API's operations, no console error, no file missing, the favicon included."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_api_docs_draw_every_operation_from_this_site(
    page: Any, login: Any, engineer: Any, screenshot: Any
) -> None:
    login(page, engineer)
    response = page.goto("/api/v1/docs")
    assert response is not None and response.status == 200
    page.wait_for_selector(".swagger-ui .opblock", timeout=20_000)
    page.wait_for_load_state("networkidle")
    assert "accelboard API" in page.inner_text(".swagger-ui .info")
    paths = page.eval_on_selector_all(
        ".swagger-ui .opblock-summary-path", "els => els.map(e => e.textContent)"
    )
    assert any("/api/v1/prometheus/write" in path for path in paths), paths
    assert any("/api/v1/runs" in path for path in paths), paths
    assert [url for url in page.network if urlsplit(url).hostname not in (None, "127.0.0.1")] == []
    assert page.js_errors == [] and page.console == [], (page.js_errors, page.console)
    screenshot(page, "api-docs")


def test_a_page_without_an_icon_link_gets_the_site_icon(page: Any, login: Any, engineer: Any) -> None:
    login(page, engineer)
    response = page.goto("/favicon.ico")
    assert response is not None and response.status == 200
    assert urlsplit(response.url).path.endswith(".svg") and "svg" in response.headers["content-type"]
