"""Forms of the notifications pages: add a subscription, change its mode, dismiss from a link,
add an alert route."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any, cast

from django import forms

from accelboard.alerts.choices import AlertKind, DismissReason, Severity
from accelboard.core.models import Team
from accelboard.importers.metrics import metric_label

from . import selectors
from .choices import DeliveryMode, RouteChannel, RouteKind
from .models import series_label


class SeriesChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        return f"{obj.team.name} · {series_label(obj)}"


def series_choices(series: Iterable[Any]) -> list[tuple[Any, Any]]:
    """The series picker's options, grouped by team and model (a team's dozens of series were
    one flat list of raw names): each option says the metric as people read it ("p99 latency"),
    its raw name, the workload and the hardware."""
    groups: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for item in series:
        variant = item.workload.variant
        hardware = f" · {item.accelerator_count}× {item.accelerator_type}" if item.accelerator_type_id else ""
        label = f"{metric_label(item.metric)} ({item.metric}) · {item.workload}{hardware}"
        groups[f"{item.team.name} · {variant.model.name} {variant.name}"].append((item.pk, label))
    return [
        ("", "Every series"),
        *((group, sorted(options, key=lambda o: o[1])) for group, options in sorted(groups.items())),
    ]


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
        field = cast(SeriesChoiceField, self.fields["series"])
        field.queryset = selectors.subscribable_series(user=user)
        field.choices = series_choices(field.queryset)

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


class RouteAddForm(forms.Form):
    """A route: whose alerts (team; personal or the team's), which, and where to."""

    team: forms.ModelChoiceField[Team] = forms.ModelChoiceField(queryset=None, empty_label=None)
    personal = forms.BooleanField(
        required=False, label="Personal route", help_text="Only you see it; any member can add one."
    )
    name = forms.CharField(max_length=80, help_text="e.g. #inference-alerts, on-call")
    channel = forms.ChoiceField(choices=RouteChannel.choices)
    kind = forms.ChoiceField(choices=RouteKind.choices, required=False, label="Alerts")
    min_severity = forms.ChoiceField(
        choices=Severity.choices, initial=Severity.WARNING, label="At least this severe"
    )
    url = forms.CharField(
        required=False,
        max_length=2000,
        label="Webhook URL",
        help_text="Slack: https://hooks.slack.com/services/…; Teams: the workflow's URL; webhook: yours.",
    )
    routing_key = forms.CharField(
        required=False,
        max_length=64,
        label="PagerDuty routing key",
        help_text="Events API v2 integration key (32 characters).",
    )

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        team_field = cast(forms.ModelChoiceField, self.fields["team"])
        team_field.queryset = selectors.subscribable_teams(user=user)
