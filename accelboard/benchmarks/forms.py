"""Forms of the benchmark pages: the runs-list filters and what an uploader adds to a file."""

from __future__ import annotations

from typing import Any

from django import forms

from accelboard.core.forms import ListFilterForm
from accelboard.core.models import Team

from .choices import Precision
from .selectors_pages import RunFilters


class RunFilterForm(ListFilterForm):
    """The runs list's filters; choices come from the runs the user may see."""

    q = forms.CharField(required=False, max_length=200, label="Search", help_text="commit, branch or model")
    model = forms.ChoiceField(required=False)
    variant = forms.ChoiceField(required=False)
    hardware = forms.ChoiceField(required=False)
    team = forms.ChoiceField(required=False)
    branch = forms.ChoiceField(required=False)
    since = forms.DateField(required=False, label="From", widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, label="To", widget=forms.DateInput(attrs={"type": "date"}))

    def filters(self) -> RunFilters:
        data = self.cleaned_data
        return RunFilters(
            model=data.get("model") or "",
            variant=data.get("variant") or "",
            hardware=data.get("hardware") or "",
            team=data.get("team") or "",
            branch=data.get("branch") or "",
            since=data.get("since"),
            until=data.get("until"),
            q=(data.get("q") or "").strip(),
        )


class UploadOverridesForm(forms.Form):
    """What the uploader states for one file: only used where the file itself is silent."""

    accelerator = forms.CharField(required=False, max_length=80)
    accelerator_count = forms.IntegerField(required=False, min_value=1, max_value=4096)
    precision = forms.ChoiceField(required=False, choices=[("", "from file")] + list(Precision.choices))
    model = forms.CharField(required=False, max_length=120)
    git_commit = forms.RegexField(
        required=False, regex=r"^[0-9a-fA-F]{4,64}$", error_messages={"invalid": "expected a hex commit id"}
    )
    branch = forms.CharField(required=False, max_length=200)
    ci_url = forms.URLField(required=False, max_length=500, assume_scheme="https")

    def overrides(self) -> dict[str, Any]:
        return {key: value for key, value in self.cleaned_data.items() if value not in (None, "")}


class UploadTeamForm(forms.Form):
    team = forms.ModelChoiceField(queryset=Team.objects.none(), empty_label=None)

    def __init__(self, *args: Any, teams: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = teams  # type: ignore[attr-defined]
