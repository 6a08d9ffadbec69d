from __future__ import annotations

from django.urls import path

from . import views

app_name = "notifications"

urlpatterns = [
    path("subscriptions/", views.subscriptions, name="subscriptions"),
    path("subscriptions/my-teams/", views.subscriptions_my_teams, name="subscriptions_my_teams"),
    path("subscriptions/<int:subscription_id>/mode/", views.subscription_mode, name="subscription_mode"),
    path(
        "subscriptions/<int:subscription_id>/delete/", views.subscription_remove, name="subscription_delete"
    ),
    path("unsubscribe/<str:token>/", views.unsubscribe, name="unsubscribe"),
]
