from __future__ import annotations

from typing import Any

from django.http import HttpRequest

# (url name, label, what the area is for): one list drives the navigation bar.
NAVIGATION = [
    ("dashboard:overview", "Overview"),
    ("dashboard:trends", "Trends"),
    ("dashboard:hardware", "Hardware"),
    ("benchmarks:run_list", "Runs"),
    ("drift:overview", "Quantization"),
    ("costs:report", "Costs"),
    ("planning:plan", "Plan"),
    ("alerts:list", "Alerts"),
    ("fleet:hosts", "Hosts"),
]
# Per-person pages, beside the user name.
USER_MENU = [
    ("core:team_list", "Teams"),
    ("notifications:subscriptions", "Alert emails"),
]


def navigation(request: HttpRequest) -> dict[str, Any]:
    return {"navigation": NAVIGATION, "user_menu": USER_MENU}
