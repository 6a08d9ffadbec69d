from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from accelboard.core import views as core_views

urlpatterns = [
    path("healthz", core_views.healthz, name="healthz"),
    path("accounts/login/", auth_views.LoginView.as_view(template_name="core/login.html"), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("accelboard.api.urls")),
    path("runs/", include("accelboard.benchmarks.urls")),
    path("costs/", include("accelboard.costs.urls")),
    path("alerts/", include("accelboard.alerts.urls")),
    path("quantization/", include("accelboard.drift.urls")),
    path("hosts/", include("accelboard.fleet.urls")),
    path("notifications/", include("accelboard.notifications.urls")),
    path("teams/", include("accelboard.core.urls")),
    path("", include("accelboard.dashboard.urls")),
]
