from __future__ import annotations

app_name = "serving"

urlpatterns: list = []
