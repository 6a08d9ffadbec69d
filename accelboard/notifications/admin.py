"""Admin of the notifications app: subscriptions, deliveries for looking into a lost email, and
the triage links that acted (who acknowledged or dismissed what from an email)."""

from __future__ import annotations

from django.contrib import admin

from .models import Delivery, DeliveryItem, Subscription, TriageLinkUse


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
