from __future__ import annotations

from django.urls import path

from .allocation_views import router as allocation_router
from .canary_views import router as canary_router
from .drift_views import router as drift_router
from .training_views import router as training_router
from .views import api

api.add_router("", drift_router)
api.add_router("", allocation_router)
api.add_router("", canary_router)
api.add_router("", training_router)

urlpatterns = [path("", api.urls)]
