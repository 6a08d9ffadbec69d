"""Forms of the notifications pages: add a subscription, change its mode, dismiss from a link."""

from __future__ import annotations

from typing import Any, cast

from django import forms

from accelboard.alerts.choices import AlertKind, DismissReason
from accelboard.core.models import Team

from . import selectors
from .choices import DeliveryMode
from .models import series_label


class SeriesChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        return f"{obj.team.name} · {series_label(obj)}"


class SubscriptionAddForm(forms.Form):
    """Team is required; a series or an alert kind narrows it (at most one of them)."""

    team: forms.ModelChoiceField[Team] = forms.ModelChoiceField(queryset=None, empty_label=None)
    series = SeriesChoiceField(
        queryset=None,
        required=False,
        empty_label="Every series",
    )
    kind = forms.ChoiceField(choices=[("", "Every kind")] + list(AlertKind.choices), required=False)
    mode = forms.ChoiceField(choices=DeliveryMode.choices, initial=DeliveryMode.IMMEDIATE)

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The form's own fields (copies of the class's): a ModelChoiceField each.
        cast(forms.ModelChoiceField, self.fields["team"]).queryset = selectors.subscribable_teams(user=user)
        cast(SeriesChoiceField, self.fields["series"]).queryset = selectors.subscribable_series(user=user)

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        series = data.get("series")
        team = data.get("team")
        if series is not None and data.get("kind"):
            self.add_error("kind", "Choose a series or an alert kind, not both.")
        if series is not None and team is not None and series.team_id != team.pk:
            self.add_error("series", f"This series belongs to {series.team.name}, not {team.name}.")
        return data


class SubscriptionModeForm(forms.Form):
    mode = forms.ChoiceField(choices=DeliveryMode.choices)


class TriageDismissForm(forms.Form):
    """Why an alert is dismissed from an email's link, as on the alert's own page."""

    reason = forms.ChoiceField(choices=DismissReason.choices, initial=DismissReason.FALSE_ALARM)
    note = forms.CharField(required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 2}))
