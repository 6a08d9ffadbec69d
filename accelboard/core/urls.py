from __future__ import annotations

app_name = "core"

urlpatterns: list = []
