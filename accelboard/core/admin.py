from __future__ import annotations

from django.contrib import admin

from .models import IngestBatch, JobRun, Membership, Team


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "created_at"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "team", "role"]
    list_filter = ["role", "team"]
    list_select_related = ["user", "team"]


@admin.register(JobRun)
class JobRunAdmin(admin.ModelAdmin):
    list_display = ["name", "status", "started_at", "duration_ms", "rows"]
    list_filter = ["name", "status"]
    readonly_fields = [f.name for f in JobRun._meta.fields]


@admin.register(IngestBatch)
class IngestBatchAdmin(admin.ModelAdmin):
    list_display = ["client_id", "kind", "team", "created_at"]
    list_filter = ["kind", "team"]
    list_select_related = ["team"]
    search_fields = ["client_id"]
    readonly_fields = ["team", "kind", "client_id", "result", "created_at"]
