"""Forms of the alert pages: the triage actions (acknowledge, resolve, dismiss,
mark expected) and the bulk action, each validated strictly so a bad value is a 400 naming the
field. The list's filters are ``alerts.filters.AlertFilterSet``."""

from __future__ import annotations

from typing import Any

from django import forms

from accelboard.alerts.choices import DismissReason

NOTE_MAX = 2000
BULK_MAX = 200


class AcknowledgeForm(forms.Form):
    """Acknowledge: nothing to fill in; taking the alert is the statement."""


class NoteForm(forms.Form):
    """Resolve: an optional note (what fixed it)."""

    note = forms.CharField(required=False, max_length=NOTE_MAX, widget=forms.Textarea(attrs={"rows": 2}))


class DismissForm(forms.Form):
    reason = forms.ChoiceField(choices=DismissReason.choices, widget=forms.RadioSelect)
    note = forms.CharField(required=False, max_length=NOTE_MAX, widget=forms.Textarea(attrs={"rows": 2}))


class ExpectedForm(forms.Form):
    # "series": the series this alert holds (one change is one alert: each metric it moved).
    SCOPES = [("series", "this alert's series only"), ("run", "every series of the first bad run")]
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
