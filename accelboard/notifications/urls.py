from __future__ import annotations

from django.urls import path

from . import views

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
    path("outbox/", views.outbox, name="outbox"),
    path("outbox/clear/", views.outbox_clear, name="outbox_clear"),
    path("outbox/<int:message_id>/", views.outbox_message, name="outbox_message"),
    path("outbox/<int:message_id>/html/", views.outbox_message_html, name="outbox_message_html"),
]
