"""Forms of the dashboard app."""

from __future__ import annotations

from typing import Any

from django import forms

from accelboard.benchmarks.choices import Precision, Scenario


class HardwareQueryForm(forms.Form):
    """The hardware page's GET parameters, so that every view of it is a shareable URL.

    ``workload`` opens the page on that workload's model and scenario; ``model`` + ``scenario``
    name the group directly; ``p99_ms`` (with an optional ``precision_floor``) asks for a
    recommendation.
    """

    workload = forms.IntegerField(required=False, min_value=1)
    model = forms.IntegerField(required=False, min_value=1)
    scenario = forms.ChoiceField(required=False, choices=[("", "Any"), *Scenario.choices])
    p99_ms = forms.FloatField(
        required=False,
        min_value=0.001,
        max_value=10_000_000,
        label="p99 latency target (ms)",
        widget=forms.NumberInput(attrs={"step": "any", "placeholder": "e.g. 20"}),
    )
    precision_floor = forms.ChoiceField(
        required=False,
        label="Precision no lower than",
        choices=[("", "Any precision"), *Precision.choices],
    )
    # A table of the page as a file (``hardware_exports``): format=csv&table=to-train.
    format = forms.ChoiceField(required=False, choices=[("", "page"), ("csv", "CSV"), ("xlsx", "XLSX")])
    table = forms.CharField(required=False, max_length=40)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("model") and not data.get("scenario"):
            self.add_error("scenario", "is required with model")
        if data.get("precision_floor") and not data.get("p99_ms"):
            self.add_error("p99_ms", "is required with a precision floor")
        return data

    def first_error(self) -> str:
        """The first error as "field: message", for the 400 page."""
        for name, errors in self.errors.items():
            return f"{name}: {errors[0]}" if name != "__all__" else str(errors[0])
        return ""
