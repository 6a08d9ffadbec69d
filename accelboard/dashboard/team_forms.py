"""Forms of the team page: members, detection thresholds and serving objectives."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.contrib.auth import get_user_model
from django.db.models import Q

from accelboard.benchmarks.models import Model, ModelVariant
from accelboard.core.choices import Role


class MemberForm(forms.Form):
    """Add a user to the team, or change a member's role (``role`` "remove" takes them out)."""

    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=[*Role.choices, ("remove", "Remove from team")])

    def clean_username(self) -> Any:
        username = self.cleaned_data["username"].strip()
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise forms.ValidationError(f"no user named {username!r}; an administrator creates accounts")
        return user


class ThresholdForm(forms.Form):
    metric = forms.CharField(
        max_length=60,
        required=False,
        help_text="A metric name, e.g. throughput_tokens_s; blank: every metric",
    )
    min_effect_pct = forms.FloatField(label="Minimum effect (%)", min_value=0.5, max_value=90.0)


class SloForm(forms.Form):
    model = forms.ModelChoiceField(queryset=Model.objects.order_by("name"))
    variant = forms.ModelChoiceField(
        queryset=ModelVariant.objects.select_related("model").order_by("model__name", "name"),
        required=False,
        help_text="Blank: every variant of the model",
    )
    p99_latency_ms = forms.FloatField(label="p99 latency ceiling (ms)", required=False, min_value=0.001)
    min_tokens_per_s = forms.FloatField(label="Tokens/s floor", required=False, min_value=0.001)

    def __init__(self, *args: Any, team: Any, **kwargs: Any) -> None:
        """Only the models the team benchmarks or serves: other teams' model names stay theirs."""
        super().__init__(*args, **kwargs)
        used = Q(workloads__team=team) | Q(inference_metrics__team=team)
        variants = ModelVariant.objects.filter(used).values("pk")
        cast(forms.ModelChoiceField, self.fields["model"]).queryset = (
            Model.objects.filter(variants__in=variants).distinct().order_by("name")
        )
        cast(forms.ModelChoiceField, self.fields["variant"]).queryset = (
            ModelVariant.objects.filter(pk__in=variants)
            .select_related("model")
            .order_by("model__name", "name")
        )

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if data.get("p99_latency_ms") is None and data.get("min_tokens_per_s") is None:
            raise forms.ValidationError("give a p99 latency ceiling, a tokens/s floor, or both")
        variant, model = data.get("variant"), data.get("model")
        if variant is not None and model is not None and variant.model_id != model.pk:
            self.add_error("variant", f"{variant.name} is not a variant of {model.name}")
        return data
