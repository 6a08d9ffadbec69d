from __future__ import annotations

from django.contrib import admin

from .models import Profile


@admin.register(Profile)
class ProfileAdmin(admin.ModelAdmin):
    list_display = ("run", "source_format", "ranks", "steps", "verdict_kind", "created_at")
    list_filter = ("source_format", "verdict_kind")
    raw_id_fields = ("run", "uploaded_by")
    readonly_fields = ("created_at",)
