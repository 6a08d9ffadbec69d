"""Admin for attribution: a new version of the rules is written as a whole list (JSON, prefilled
with the current version) and saved through ``services.rule_set_save``, which refuses conflicts
naming both rules and teams the admin may not manage; versions are read-only once saved. The
allocation rows are read-only, with the explicit action that re-applies the current rules to
their days."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest

from accelboard.core.models import Team

from .models import AllocationDaily, AttributionRule, RuleSet
from .selectors import rule_set_current
from .services import RuleInput, rule_set_check, rule_set_save
from .tasks import allocation_recompute_enqueue

RULE_KEYS = {"selector", "value", "team", "model", "variant"}
HELP = (
    'A JSON list, one object a rule: {"selector": "namespace", "value": "llm-serving", "team": '
    '"<team slug>"}; selectors: label (value key=value), namespace, account, user (a team), '
    "model_name (value: the model name of the serving metrics on the GPUs a workload held; a model); "
    'a label rule may name "model" and "variant" too. Earlier rules are older.'
)


def _parsed(value: Any) -> list[RuleInput]:
    if not isinstance(value, list):
        raise ValidationError("rules: must be a JSON list")
    teams = {t.slug: t for t in Team.objects.all()}
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise ValidationError(f"rules[{i}]: must be an object")
        unknown = sorted(set(item) - RULE_KEYS)
        if unknown:
            raise ValidationError(f"rules[{i}].{unknown[0]}: unknown field")
        for key in RULE_KEYS:
            if item.get(key) is not None and not isinstance(item[key], str):
                raise ValidationError(f"rules[{i}].{key}: must be a string")
        slug = item.get("team")
        if slug and slug not in teams:
            raise ValidationError(f"rules[{i}].team: no team {slug!r}")
        out.append(
            RuleInput(
                selector=item.get("selector") or "",
                value=item.get("value") or "",
                team=teams[slug] if slug else None,
                model=item.get("model") or "",
                variant=item.get("variant") or "",
            )
        )
    return out


def _current_json() -> str:
    current = rule_set_current()
    rules = [] if current is None else current.rules.select_related("team").order_by("position")
    return json.dumps(
        [
            {
                key: value
                for key, value in {
                    "selector": r.selector,
                    "value": r.value,
                    "team": r.team.slug if r.team else None,
                    "model": r.model or None,
                    "variant": r.variant or None,
                }.items()
                if value is not None
            }
            for r in rules
        ],
        indent=1,
    )


class RuleSetForm(forms.ModelForm):
    rules_json = forms.JSONField(label="Rules", help_text=HELP)

    class Meta:
        model = RuleSet
        fields = ["note"]

    user: Any = None  # set by RuleSetAdmin.get_form

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if "rules_json" in data:
            try:
                data["rules"] = _parsed(data["rules_json"])
                rule_set_check(user=self.user, rules=data["rules"])
            except ValidationError as exc:
                found = exc.message_dict.items() if hasattr(exc, "error_dict") else [("rules", exc.messages)]
                self.add_error("rules_json", [f"{path}: {' '.join(texts)}" for path, texts in found])
            except PermissionDenied as exc:
                self.add_error("rules_json", str(exc))
        return data


class AttributionRuleInline(admin.TabularInline):
    model = AttributionRule
    fields = ("position", "selector", "value", "team", "model", "variant")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(RuleSet)
class RuleSetAdmin(admin.ModelAdmin):
    list_display = ["version", "created_by", "created_at", "note"]
    form = RuleSetForm
    inlines = [AttributionRuleInline]  # read-only: a saved version's rules

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)
        if issubclass(form, RuleSetForm):
            form.user = request.user
        if obj is None:
            form.base_fields["rules_json"].initial = _current_json()
        return form

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ["note", "rules_json"] if obj is None else ["version", "created_by", "created_at", "note"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [] if obj is None else ["version", "created_by", "created_at", "note"]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a version stays as saved: change the rules by saving the next one

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: Any, form: forms.ModelForm, change: bool) -> None:
        saved = rule_set_save(user=request.user, rules=form.cleaned_data["rules"], note=obj.note)
        obj.pk, obj.version, obj.created_at = saved.pk, saved.version, saved.created_at
        obj.created_by_id = saved.created_by_id
        self.message_user(
            request,
            f"Saved as rules v{saved.version}. Past days keep their allocation until re-applied "
            "(the action on daily allocations, or `accelboard allocation recompute`).",
            messages.INFO,
        )


@admin.register(AllocationDaily)
class AllocationDailyAdmin(admin.ModelAdmin):
    list_display = [
        "day",
        "accelerator",
        "kind",
        "workload",
        "team",
        "model",
        "variant",
        "model_source",
        "cost_allocation",
        "cost_usage",
        "currency",
        "rule_set",
    ]
    list_filter = ["kind", "model_source", "day"]
    list_select_related = ["accelerator__host", "workload", "team", "rule_set"]
    actions = ["reapply_rules"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.action(description="Re-apply the current rules to the selected rows' days")
    def reapply_rules(self, request: HttpRequest, queryset: QuerySet[AllocationDaily]) -> None:
        days = set(queryset.values_list("day", flat=True).distinct())
        count = allocation_recompute_enqueue(days=days)
        self.message_user(request, f"{count} day(s) queued to be recomputed with the current rules.")
