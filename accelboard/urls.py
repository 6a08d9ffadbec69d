from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from accelboard.core import oidc
from accelboard.core import views as core_views

urlpatterns = [
    path("healthz", core_views.healthz, name="healthz"),
    path("favicon.ico", core_views.favicon, name="favicon"),
    path("accounts/login/", core_views.LoginPage.as_view(), name="login"),
    path("oidc/authenticate/", oidc.SignInStart.as_view(), name="oidc_authentication_init"),
    path("oidc/callback/", oidc.SignInCallback.as_view(), name="oidc_authentication_callback"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("accelboard.api.urls")),
    path("runs/", include("accelboard.dashboard.run_urls")),
    path("runs/", include("accelboard.profiles.urls")),
    path("costs/allocation/", include("accelboard.attribution.allocation_urls")),
    path("costs/", include("accelboard.costs.urls")),
    path("plan/", include("accelboard.planning.urls")),
    path("alerts/", include("accelboard.dashboard.alert_urls")),
    path("quantization/", include("accelboard.drift.urls")),
    path("canary/", include("accelboard.canary.urls")),
    path("hosts/", include("accelboard.fleet.urls")),
    path("workloads/", include("accelboard.attribution.workload_urls")),
    path("notifications/", include("accelboard.notifications.urls")),
    path("teams/", include("accelboard.dashboard.team_urls")),
    path("", include("accelboard.dashboard.urls")),
]

# The API's paths answer errors in the API's JSON shape; every other path gets the site's pages.
handler404 = "accelboard.api.errors.page_not_found"
handler500 = "accelboard.api.errors.server_error"
