from __future__ import annotations

app_name = "notifications"

urlpatterns: list = []
