from __future__ import annotations

app_name = "costs"

urlpatterns: list = []
