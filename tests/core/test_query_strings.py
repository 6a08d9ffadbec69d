"""A query string the database cannot take (a NUL character) is a 400 naming the parameter on
every page, never a 500."""

from __future__ import annotations

from typing import Any

import pytest

PAGES = ["/", "/trends/", "/hardware/", "/runs/", "/runs/compare/", "/alerts/", "/costs/", "/costs/drill/",
         "/quantization/", "/hosts/", "/teams/", "/notifications/subscriptions/"]  # fmt: skip
NAMES = ["model", "variant", "hardware", "metric", "accelerator", "branch", "team", "state", "q"]


@pytest.mark.parametrize("page", PAGES)
def test_a_nul_in_a_query_parameter_is_a_400_naming_it(page: str, lead: Any, login_client: Any) -> None:
    client = login_client(lead)
    for name in NAMES:
        response = client.get(f"{page}?{name}=x%00y")
        assert response.status_code == 400, (page, name, response.status_code)
        assert name in response.content.decode()


def test_a_nul_in_a_parameter_name_is_a_400(lead: Any, login_client: Any) -> None:
    response = login_client(lead).get("/trends/?mo%00del=x")
    assert response.status_code == 400


def test_the_trends_page_still_reads_its_filters(lead: Any, login_client: Any) -> None:
    assert login_client(lead).get("/trends/?model=Llama").status_code in (200, 302)
