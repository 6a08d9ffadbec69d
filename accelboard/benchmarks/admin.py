from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.utils.html import format_html_join

from .catalogue import BUILTIN_MODELS, accelerator_key
from .catalogue_selectors import accelerator_catalogue_for, model_catalogue_for
from .catalogue_services import model_alias_key
from .models import (
    AcceleratorAlias,
    BenchmarkRun,
    MetricValue,
    Model,
    ModelAlias,
    ModelVariant,
    Series,
    Workload,
)

_BUILTIN_ALIASES = {entry.name: entry.aliases for entry in BUILTIN_MODELS}


class VariantInline(admin.TabularInline):
    model = ModelVariant
    extra = 0
    fields = ["name", "team", "precision", "quantization_method", "calibration_data"]


class AliasInline(admin.TabularInline):
    model = ModelAlias
    extra = 0
    fields = ["name", "team", "created_by", "created_at"]
    readonly_fields = ["created_by", "created_at"]


@admin.register(Model)
class ModelAdmin(admin.ModelAdmin):
    """The catalogue's models: family, size, fine-tune; the built-in aliases are listed read-only,
    the team's and shared ones are edited inline."""

    list_display = [
        "name",
        "team",
        "family",
        "parameters_b",
        "fine_tune",
        "task",
        "reference_variant",
        "drift_budget",
    ]
    list_filter = [("team", admin.EmptyFieldListFilter), "team"]
    search_fields = ["name", "family", "aliases__name"]
    readonly_fields = ["builtin_aliases"]
    inlines = [VariantInline, AliasInline]

    @admin.display(description="Built-in aliases")
    def builtin_aliases(self, obj: Model) -> str:
        aliases = _BUILTIN_ALIASES.get(obj.name, ())
        return format_html_join(", ", "<code>{}</code>", ((alias,) for alias in aliases)) or "—"

    def save_formset(self, request: Any, form: Any, formset: Any, change: bool) -> None:
        for alias in formset.save(commit=False):
            if isinstance(alias, ModelAlias):
                alias.key = model_alias_key(alias.name)
                alias.created_by = alias.created_by or request.user
            alias.save()
        for removed in formset.deleted_objects:
            removed.delete()
        formset.save_m2m()


class ModelAliasForm(forms.ModelForm):
    """An alias for one team, or (no team) for every team; never another model's name."""

    class Meta:
        model = ModelAlias
        fields = ["name", "model", "team"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        name, model = data.get("name", ""), data.get("model")
        if name and model is not None:
            canonical = model_catalogue_for(team=data.get("team")).is_canonical(name)
            if canonical is not None and canonical != model.name:
                self.add_error("name", f"{name!r} is the name of the model {canonical!r}")
            duplicate = ModelAlias.objects.filter(team=data.get("team"), key=model_alias_key(name))
            if duplicate.exclude(pk=self.instance.pk).exists():
                self.add_error("name", "this team already has this alias")
        return data


@admin.register(ModelAlias)
class ModelAliasAdmin(admin.ModelAdmin):
    form = ModelAliasForm
    list_display = ["name", "model", "team", "created_by", "created_at"]
    list_filter = ["team"]
    search_fields = ["name", "model__name"]
    list_select_related = ["model", "team", "created_by"]

    def save_model(self, request: Any, obj: ModelAlias, form: Any, change: bool) -> None:
        obj.key = model_alias_key(obj.name)
        obj.created_by = obj.created_by or request.user
        super().save_model(request, obj, form, change)


class AcceleratorAliasForm(forms.ModelForm):
    class Meta:
        model = AcceleratorAlias
        fields = ["name", "accelerator_type", "team"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        name, target = data.get("name", ""), data.get("accelerator_type")
        if name and target is not None:
            if not accelerator_key(name):
                self.add_error("name", "no words to match on")
            found = accelerator_catalogue_for(team=data.get("team")).resolve(name)
            if found.how == "exact" and found.target != target.slug:
                self.add_error("name", f"{name!r} is the name of the accelerator type {found.target!r}")
            duplicate = AcceleratorAlias.objects.filter(team=data.get("team"), key=accelerator_key(name))
            if duplicate.exclude(pk=self.instance.pk).exists():
                self.add_error("name", "this team already has this alias")
        return data


@admin.register(AcceleratorAlias)
class AcceleratorAliasAdmin(admin.ModelAdmin):
    form = AcceleratorAliasForm
    list_display = ["name", "accelerator_type", "team", "created_by", "created_at"]
    list_filter = ["team", "accelerator_type"]
    search_fields = ["name", "accelerator_type__name"]
    list_select_related = ["accelerator_type", "team", "created_by"]

    def save_model(self, request: Any, obj: AcceleratorAlias, form: Any, change: bool) -> None:
        obj.key = accelerator_key(obj.name)
        obj.created_by = obj.created_by or request.user
        super().save_model(request, obj, form, change)


@admin.register(ModelVariant)
class ModelVariantAdmin(admin.ModelAdmin):
    list_display = ["model", "name", "team", "precision", "quantization_method"]
    list_filter = ["team", "precision", "quantization_method"]
    search_fields = ["model__name", "name"]
    list_select_related = ["model"]


@admin.register(Workload)
class WorkloadAdmin(admin.ModelAdmin):
    list_display = ["__str__", "team", "scenario", "batch_size", "concurrency", "framework"]
    list_filter = ["team", "scenario", "framework"]
    list_select_related = ["team", "variant__model"]
    readonly_fields = ["identity"]


class MetricInline(admin.TabularInline):
    model = MetricValue
    extra = 0
    fields = ("name", "value", "unit", "direction", "raw_value", "raw_unit", "source")
    readonly_fields = fields


@admin.register(BenchmarkRun)
class BenchmarkRunAdmin(admin.ModelAdmin):
    list_display = [
        "started_at",
        "workload",
        "accelerator_type",
        "accelerator_count",
        "model_name",
        "model_match",
        "git_commit",
        "branch",
        "team",
    ]
    list_filter = [
        "team",
        "accelerator_type",
        "uploaded_via",
        "source_format",
        "valid",
        "model_match",
        "accelerator_match",
    ]
    search_fields = ["git_commit", "branch", "uuid", "model_name", "accelerator_name"]
    list_select_related = ["workload__variant__model", "accelerator_type", "team"]
    date_hierarchy = "started_at"
    inlines = [MetricInline]


@admin.register(Series)
class SeriesAdmin(admin.ModelAdmin):
    list_display = ["metric", "workload", "accelerator_type", "accelerator_count", "direction", "last_value"]
    list_filter = ["metric", "accelerator_type", "team"]
    list_select_related = ["workload__variant__model", "accelerator_type"]


@admin.register(MetricValue)
class MetricValueAdmin(admin.ModelAdmin):
    list_display = ["measured_at", "name", "value", "unit", "run"]
    list_filter = ["name"]
    list_select_related = ["run"]
    show_full_result_count = False
