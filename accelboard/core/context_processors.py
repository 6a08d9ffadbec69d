from __future__ import annotations

from typing import Any

from django.http import HttpRequest

# (url name, label, what the area is for): one list drives the navigation bar.
NAVIGATION = [
    ("dashboard:overview", "Overview"),
    ("dashboard:trends", "Trends"),
    ("dashboard:hardware", "Hardware"),
    ("benchmarks:run_list", "Runs"),
    ("dashboard:drift", "Quantization"),
    ("dashboard:costs", "Costs"),
    ("dashboard:alerts", "Alerts"),
    ("dashboard:hosts", "Hosts"),
]


def navigation(request: HttpRequest) -> dict[str, Any]:
    return {"navigation": NAVIGATION}
