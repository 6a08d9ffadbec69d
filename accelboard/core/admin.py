from __future__ import annotations

from django.contrib import admin

from .models import ExternalIdentity, IngestBatch, JobRun, Membership, Team


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
    list_display = ["user", "team", "role", "source"]
    list_filter = ["role", "source", "team"]
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


@admin.register(ExternalIdentity)
class ExternalIdentityAdmin(admin.ModelAdmin):
    """Who signed in through single sign-on, and the groups their last sign-in carried."""

    list_display = ["user", "subject", "issuer", "last_sign_in"]
    list_select_related = ["user"]
    search_fields = ["user__username", "subject"]
    readonly_fields = ["user", "issuer", "subject", "groups", "last_sign_in"]
