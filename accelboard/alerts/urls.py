from __future__ import annotations

app_name = "alerts"

urlpatterns: list = []
