"""Forms of the alert pages: list filters and the triage actions (acknowledge, resolve, dismiss,
mark expected), each validated strictly so a bad value is a 400 naming the field."""

from __future__ import annotations

from typing import Any

from django import forms

from accelboard.core.forms import ListFilterForm

from .choices import AlertKind, AlertState, DismissReason, Severity
from .page_selectors import AlertFilters

NOTE_MAX = 2000
BULK_MAX = 200


def _any(choices: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [("", "Any")] + list(choices)


class AlertFilterForm(ListFilterForm):
    """The list page's filters; team, model and metric choices come from what the user may see."""

    state = forms.ChoiceField(required=False, choices=_any(AlertState.choices))
    kind = forms.ChoiceField(required=False, choices=_any(AlertKind.choices))
    severity = forms.ChoiceField(required=False, choices=_any(Severity.choices))
    team = forms.ChoiceField(required=False)
    model = forms.ChoiceField(required=False)
    metric = forms.ChoiceField(required=False)
    since = forms.DateField(required=False, label="From", widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, label="To", widget=forms.DateInput(attrs={"type": "date"}))

    def filters(self) -> AlertFilters:
        data = self.cleaned_data
        return AlertFilters(
            state=data.get("state") or "",
            kind=data.get("kind") or "",
            severity=data.get("severity") or "",
            team=data.get("team") or "",
            model=data.get("model") or "",
            metric=data.get("metric") or "",
            since=data.get("since"),
            until=data.get("until"),
        )


class AcknowledgeForm(forms.Form):
    """Acknowledge: nothing to fill in; taking the alert is the statement."""


class NoteForm(forms.Form):
    """Resolve: an optional note (what fixed it)."""

    note = forms.CharField(required=False, max_length=NOTE_MAX, widget=forms.Textarea(attrs={"rows": 2}))


class DismissForm(forms.Form):
    reason = forms.ChoiceField(choices=DismissReason.choices, widget=forms.RadioSelect)
    note = forms.CharField(required=False, max_length=NOTE_MAX, widget=forms.Textarea(attrs={"rows": 2}))


class ExpectedForm(forms.Form):
    SCOPES = [("series", "this series only"), ("run", "every series of the first bad run")]
    scope = forms.ChoiceField(choices=SCOPES, initial="series", widget=forms.RadioSelect)
    note = forms.CharField(
        required=False,
        max_length=NOTE_MAX,
        widget=forms.Textarea(
            attrs={"rows": 2, "placeholder": "why, e.g. new kernel trades latency for memory"}
        ),
    )


class BulkTriageForm(forms.Form):
    """The list page's bulk action: acknowledge, or dismiss with a reason, the ticked alerts."""

    ACTIONS = [("acknowledge", "Acknowledge"), ("dismiss", "Dismiss")]
    action = forms.ChoiceField(choices=ACTIONS)
    ids = forms.CharField(max_length=BULK_MAX * 12)
    reason = forms.ChoiceField(required=False, choices=[("", "—")] + list(DismissReason.choices))

    def clean_ids(self) -> list[int]:
        raw = self.data.getlist("ids") if hasattr(self.data, "getlist") else [self.cleaned_data["ids"]]
        ids: list[int] = []
        for chunk in raw:
            for part in str(chunk).split(","):
                part = part.strip()
                if not part:
                    continue
                if not part.isdigit():
                    raise forms.ValidationError(f"{part!r} is not an alert id")
                ids.append(int(part))
        if not ids:
            raise forms.ValidationError("tick at least one alert")
        if len(ids) > BULK_MAX:
            raise forms.ValidationError(f"at most {BULK_MAX} alerts at once")
        return sorted(set(ids))

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("action") == "dismiss" and not data.get("reason"):
            self.add_error("reason", "choose why these alerts are dismissed (false alarm or expected)")
        return data
