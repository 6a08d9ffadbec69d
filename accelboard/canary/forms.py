"""The page form that creates or edits a canary check (team leads and staff: ``Action.MANAGE``).

Selectors and minimum effects are written as ``name=value`` pairs, comma-separated
(``track=canary, app=chat``); the service (``services.canary_check_create``) checks the rest and
its refusals are shown on the field they name."""

from __future__ import annotations

from typing import Any

from django import forms

from . import analysis


def pairs_parse(text: str, *, what: str) -> dict[str, str]:
    """``"a=1, b=2"`` -> ``{"a": "1", "b": "2"}``; ValueError naming the bad pair."""
    out: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, equals, value = (side.strip() for side in item.partition("="))
        if not equals or not name or not value:
            raise ValueError(f"{item!r} is not {what}=value")
        if name in out:
            raise ValueError(f"{name!r} is given twice")
        out[name] = value
    return out


def pairs_text(values: dict[str, Any]) -> str:
    return ", ".join(f"{name}={value}" for name, value in values.items())


class CanaryCheckForm(forms.Form):
    team = forms.TypedChoiceField(coerce=int, help_text="Whose check (the teams you lead)")
    model = forms.CharField(max_length=200, help_text="The model's name, as its serving intervals name it")
    name = forms.SlugField(max_length=80, help_text="The endpoint's name: /api/v1/canary/<name>")
    baseline = forms.CharField(
        max_length=500, help_text="Labels of the baseline deployment: track=stable (variant=, host= too)"
    )
    canary = forms.CharField(max_length=500, help_text="Labels of the canary deployment: track=canary")
    window_minutes = forms.IntegerField(
        min_value=1, max_value=7 * 24 * 60, initial=60, help_text="The window compared, ending now"
    )
    alpha = forms.FloatField(initial=analysis.ALPHA, help_text="Significance level of each metric's test")
    min_effects = forms.CharField(
        max_length=1000,
        required=False,
        help_text="Minimum effects overriding the defaults, as fractions: e2e_p50_ms=0.05, error_rate=0.01",
    )
    active = forms.BooleanField(
        required=False, initial=True, help_text="Checked every 5 minutes; a fail alerts"
    )

    def __init__(
        self, *args: Any, teams: list[tuple[int, str]], editing: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        team_field = self.fields["team"]
        assert isinstance(team_field, forms.ChoiceField)
        team_field.choices = teams
        if editing:  # the endpoint's name and its team are what controllers poll: fixed
            self.fields["team"].disabled = True
            self.fields["name"].disabled = True

    def _selector(self, field: str) -> dict[str, str]:
        try:
            value = pairs_parse(self.cleaned_data[field], what="label")
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None
        if not value:
            raise forms.ValidationError("at least one label=value pair")
        return value

    def clean_baseline(self) -> dict[str, str]:
        return self._selector("baseline")

    def clean_canary(self) -> dict[str, str]:
        return self._selector("canary")

    def clean_min_effects(self) -> dict[str, float]:
        try:
            given = pairs_parse(self.cleaned_data.get("min_effects") or "", what="metric")
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None
        out: dict[str, float] = {}
        for key, text in given.items():
            if key not in analysis.METRIC_KEYS:
                raise forms.ValidationError(
                    f"unknown metric {key!r} (one of {', '.join(analysis.METRIC_KEYS)})"
                )
            try:
                out[key] = float(text)
            except ValueError:
                raise forms.ValidationError(f"{key}: {text!r} is not a number") from None
        return out
