from __future__ import annotations

app_name = "fleet"

urlpatterns: list = []
