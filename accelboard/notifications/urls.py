from __future__ import annotations

from django.urls import path

from . import route_views, views

app_name = "notifications"

urlpatterns = [
    path("subscriptions/", views.subscriptions, name="subscriptions"),
    path("subscriptions/my-teams/", views.subscriptions_my_teams, name="subscriptions_my_teams"),
    path("subscriptions/test-email/", views.test_email, name="test_email"),
    path("subscriptions/<int:subscription_id>/mode/", views.subscription_mode, name="subscription_mode"),
    path(
        "subscriptions/<int:subscription_id>/delete/", views.subscription_remove, name="subscription_delete"
    ),
    path("unsubscribe/<str:token>/", views.unsubscribe, name="unsubscribe"),
    path("triage/<str:token>/", views.triage, name="triage"),
    path("routes/", route_views.routes, name="routes"),
    path("routes/<int:route_id>/delete/", route_views.route_remove, name="route_delete"),
    path("routes/<int:route_id>/test/", route_views.route_test, name="route_test"),
    path("charts/<str:token>.png", route_views.route_chart, name="route_chart"),
    path("outbox/", views.outbox, name="outbox"),
    path("outbox/clear/", views.outbox_clear, name="outbox_clear"),
    path("outbox/<int:message_id>/", views.outbox_message, name="outbox_message"),
    path("outbox/<int:message_id>/html/", views.outbox_message_html, name="outbox_message_html"),
]
