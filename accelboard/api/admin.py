from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from . import services
from .models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["prefix", "name", "team", "kind", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["kind", "team", ("revoked_at", admin.EmptyFieldListFilter)]
    list_select_related = ["team"]
    search_fields = ["prefix", "name", "team__slug"]
    actions = ["revoke"]

    def get_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> tuple[str, ...]:
        if obj is None:  # creating: the secret is drawn by the service, never typed in
            return ("team", "kind", "name")
        return ("team", "kind", "name", "prefix", "created_by", "created_at", "last_used_at", "revoked_at")

    def get_readonly_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> list[str]:
        if obj is None:
            return []
        return ["team", "kind", "prefix", "created_by", "created_at", "last_used_at", "revoked_at"]

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        row, token = services.token_create(
            team=obj.team, kind=obj.kind, name=obj.name, created_by=request.user
        )
        for name in ("pk", "prefix", "secret_hash", "created_at", "created_by_id"):
            setattr(obj, name, getattr(row, name))
        obj._state.adding = False
        messages.warning(
            request,
            f"The new token is {token} — copy it now: it is stored hashed and will not be shown again.",
        )

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        prefixes = queryset.filter(revoked_at__isnull=True).values_list("prefix", flat=True)
        count = sum(1 for prefix in prefixes if services.token_revoke(prefix=prefix) is not None)
        self.message_user(request, f"Revoked {count} token(s).")
