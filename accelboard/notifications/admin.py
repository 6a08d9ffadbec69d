"""Admin of the notifications app: subscriptions, and deliveries for looking into a lost email."""

from __future__ import annotations

from django.contrib import admin

from .models import Delivery, DeliveryItem, Subscription


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
