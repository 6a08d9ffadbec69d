from __future__ import annotations

from django.urls import path

from .drift_views import router as drift_router
from .views import api

api.add_router("", drift_router)

urlpatterns = [path("", api.urls)]
