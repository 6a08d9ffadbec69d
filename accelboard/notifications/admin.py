"""Admin of the notifications app: subscriptions, deliveries for looking into a lost email, and
the triage links that acted (who acknowledged or dismissed what from an email), alert routes and
their delivery log (a route's encrypted secret is never shown)."""

from __future__ import annotations

from django.contrib import admin

from .models import AlertRoute, Delivery, DeliveryItem, RouteDelivery, Subscription, TriageLinkUse


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):
    list_display = ["user", "team", "series", "kind", "mode", "created_at"]
    list_filter = ["mode", "kind", "team"]
    raw_id_fields = ["user", "series"]


class DeliveryItemInline(admin.TabularInline):
    model = DeliveryItem
    raw_id_fields = ["alert", "user"]
    extra = 0


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ["created_at", "user", "mode", "group_key", "status", "attempts", "sent_at"]
    list_filter = ["status", "mode"]
    search_fields = ["group_key", "subject", "user__username", "last_error"]
    raw_id_fields = ["user", "subscription"]
    inlines = [DeliveryItemInline]


@admin.register(TriageLinkUse)
class TriageLinkUseAdmin(admin.ModelAdmin):
    list_display = ["used_at", "user", "action", "alert", "delivery"]
    list_filter = ["action"]
    raw_id_fields = ["user", "alert", "delivery"]
    readonly_fields = ["digest", "user", "alert", "action", "delivery", "used_at"]


@admin.register(AlertRoute)
class AlertRouteAdmin(admin.ModelAdmin):
    list_display = ["name", "team", "user", "channel", "kind", "min_severity", "target_hint", "created_at"]
    list_filter = ["channel", "kind", "min_severity"]
    raw_id_fields = ["team", "user", "created_by"]
    # Routes are added on the routes page, which checks the target; the secret stays sealed.
    exclude = ["secret"]
    readonly_fields = ["channel", "target_hint", "created_by", "created_at"]

    def has_add_permission(self, request: object) -> bool:
        return False


@admin.register(RouteDelivery)
class RouteDeliveryAdmin(admin.ModelAdmin):
    list_display = ["created_at", "route", "event", "group_key", "status", "attempts", "response_status"]
    list_filter = ["status", "event"]
    search_fields = ["group_key", "summary", "last_error", "response_body"]
    raw_id_fields = ["route"]
