"""Forms of the runs pages: what an uploader adds to a file, and which team it goes to (the runs
list's filters are ``benchmarks.filters.RunFilterSet``)."""

from __future__ import annotations

from typing import Any, cast

from django import forms

from accelboard.benchmarks.choices import Precision, Scenario
from accelboard.core.models import Team
from accelboard.fleet.choices import FormFactor, Vendor

# The pickers' value for "make a new one" (never a model's or an accelerator type's name).
NEW = "__new__"


class UploadOverridesForm(forms.Form):
    """What the uploader states for one run. Each field applies over what the file says (it is
    recorded as the uploader's); a field left empty leaves the file's value. ``model`` and
    ``accelerator`` pick a catalogue identity, or ``NEW`` with ``new_model`` / ``new_accelerator``
    (and the new type's facts) to add one; ``remember`` keeps the file's names as the team's
    aliases of what was picked."""

    model = forms.CharField(required=False, max_length=120)
    new_model = forms.CharField(required=False, max_length=120)
    accelerator = forms.CharField(required=False, max_length=80)
    new_accelerator = forms.CharField(required=False, max_length=80)
    accelerator_vendor = forms.ChoiceField(required=False, choices=[("", "")] + list(Vendor.choices))
    accelerator_product = forms.CharField(required=False, max_length=40)
    accelerator_form_factor = forms.ChoiceField(required=False, choices=[("", "")] + list(FormFactor.choices))
    accelerator_memory_gb = forms.FloatField(required=False, min_value=0.1, max_value=16384)
    accelerator_tdp_w = forms.FloatField(required=False, min_value=1, max_value=10000)
    remember = forms.BooleanField(required=False)
    accelerator_count = forms.IntegerField(required=False, min_value=1, max_value=4096)
    precision = forms.ChoiceField(required=False, choices=[("", "from file")] + list(Precision.choices))
    # What the file does not say (a scenario "not stated"); never offered as a default.
    scenario = forms.ChoiceField(
        required=False,
        choices=[("", "from file")] + [c for c in Scenario.choices if c[0] != Scenario.UNSTATED],
    )
    git_commit = forms.RegexField(
        required=False, regex=r"^[0-9a-fA-F]{4,64}$", error_messages={"invalid": "expected a hex commit id"}
    )
    branch = forms.CharField(required=False, max_length=200)
    ci_url = forms.URLField(required=False, max_length=500, assume_scheme="https")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("model") == NEW and not data.get("new_model", "").strip():
            self.add_error("new_model", "name the new model")
        if data.get("accelerator") == NEW:
            if not data.get("new_accelerator", "").strip():
                self.add_error("new_accelerator", "name the new accelerator type")
            if not data.get("accelerator_vendor"):
                self.add_error("accelerator_vendor", "give the new accelerator type's vendor")
        return data

    def overrides(self) -> dict[str, Any]:
        """The import's overrides: a new model or type becomes its name plus ``create_*``."""
        data = {key: value for key, value in self.cleaned_data.items() if value not in (None, "", False)}
        model, new_model = data.pop("model", ""), data.pop("new_model", "")
        if model == NEW:
            data["model"], data["create_model"] = new_model, "1"
        elif model:
            data["model"] = model
        new_type = data.pop("new_accelerator", "")
        if data.get("accelerator") == NEW:
            data["accelerator"], data["create_accelerator"] = new_type, "1"
        else:
            for key in [key for key in data if key.startswith("accelerator_") and key != "accelerator_count"]:
                del data[key]  # a new type's facts mean nothing without a new type
        if data.pop("remember", False):
            data["remember"] = "1"
        return data


class UploadTeamForm(forms.Form):
    team = forms.ModelChoiceField(queryset=Team.objects.none(), empty_label=None)

    def __init__(self, *args: Any, teams: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ModelChoiceField, self.fields["team"]).queryset = teams
