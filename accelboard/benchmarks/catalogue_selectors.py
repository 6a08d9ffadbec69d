"""Reads of the model and accelerator catalogue: what one team's names resolve against, and what
its uploaders may pick from.

A team sees the built-in entries (``catalogue``), the shared models and its own (never another
team's: their names tell it nothing), every accelerator type, its own aliases and the shared ones
(no team). The pure resolvers do the matching.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q

from accelboard.core.models import Team
from accelboard.fleet.models import AcceleratorType

from .catalogue import (
    BUILTIN_MODELS,
    SHARED,
    TEAM,
    AcceleratorCatalogue,
    Alias,
    ModelCatalogue,
    builtin_accelerator_entries,
)
from .models import AcceleratorAlias, Model, ModelAlias


def _team_q(team: Team | None) -> Q:
    return Q(team__isnull=True) | Q(team=team) if team is not None else Q(team__isnull=True)


def model_catalogue_for(*, team: Team | None) -> ModelCatalogue:
    """The models a raw name may resolve to for ``team`` (None: shared aliases only)."""
    aliases = [
        Alias(name=name, target=target, source=TEAM if team_id else SHARED)
        for team_id, name, target in ModelAlias.objects.filter(_team_q(team)).values_list(
            "team_id", "name", "model__name"
        )
    ]
    models = Model.objects.for_team(team).values_list("name", flat=True)
    return ModelCatalogue(models=models, aliases=aliases)


def accelerator_catalogue_for(*, team: Team | None) -> AcceleratorCatalogue:
    """The accelerator types a raw name may resolve to for ``team``, with their spellings."""
    types = AcceleratorType.objects.values_list("slug", "name", "product", "match_names")
    aliases = [
        Alias(name=name, target=target, source=TEAM if team_id else SHARED)
        for team_id, name, target in AcceleratorAlias.objects.filter(_team_q(team)).values_list(
            "team_id", "name", "accelerator_type__slug"
        )
    ]
    return AcceleratorCatalogue(
        entries=builtin_accelerator_entries(
            (slug, name, product, match_names or []) for slug, name, product, match_names in types
        ),
        aliases=aliases,
    )


@dataclass(frozen=True)
class Catalogues:
    """A team's two resolvers, read once for the runs of one upload's preview."""

    models: ModelCatalogue
    accelerators: AcceleratorCatalogue


def catalogues_for(*, team: Team | None) -> Catalogues:
    return Catalogues(
        models=model_catalogue_for(team=team), accelerators=accelerator_catalogue_for(team=team)
    )


@dataclass(frozen=True)
class Choice:
    """One entry of an upload's pickers: the value to send and what to show."""

    value: str
    label: str


def model_choices_for(*, teams: list[Team]) -> list[Choice]:
    """Models an uploader of ``teams`` may pick: the built-in ones, the models of the teams' runs
    and the targets of their aliases, by name (not every team's models: names are not shared)."""
    names = {entry.name for entry in BUILTIN_MODELS}
    names.update(Model.objects.filter(variants__workloads__team__in=teams).values_list("name", flat=True))
    names.update(
        ModelAlias.objects.filter(Q(team__in=teams) | Q(team__isnull=True)).values_list(
            "model__name", flat=True
        )
    )
    details = {
        row[0]: row[1:]
        for row in Model.objects.filter(Q(team__isnull=True) | Q(team__in=teams), name__in=names).values_list(
            "name", "family", "parameters_b", "fine_tune"
        )
    }
    builtin = {entry.name: (entry.family, entry.parameters_b, entry.fine_tune) for entry in BUILTIN_MODELS}
    choices = []
    for name in sorted(names, key=str.lower):
        family, size, fine_tune = details.get(name) or builtin.get(name) or ("", None, "")
        facts = [part for part in (family, f"{size:g}B" if size else "", fine_tune) if part]
        choices.append(Choice(value=name, label=f"{name} ({', '.join(facts)})" if facts else name))
    return choices


def accelerator_choices() -> list[Choice]:
    """Every accelerator type, by name, with its memory and form factor."""
    choices = []
    for row in AcceleratorType.objects.order_by("name"):
        facts = [
            row.get_vendor_display(),
            f"{row.memory_bytes / 1024**3:.0f} GiB" if row.memory_bytes else "",
            row.get_form_factor_display() if row.form_factor else "",
        ]
        choices.append(Choice(value=row.name, label=f"{row.name} ({', '.join(f for f in facts if f)})"))
    return choices
