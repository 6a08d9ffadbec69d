"""Writes of the model and accelerator catalogue: canonical models made from the built-in entries or
an uploader's new name, and aliases a team (or an admin, for every team) adds.

An alias never takes a canonical name: ``Llama-2-70B`` cannot become another model's alias, so a
canonical name always means its own model.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from accelboard.core.models import Team
from accelboard.fleet.models import AcceleratorType

from .catalogue import accelerator_key, model_key, split_org
from .catalogue_selectors import accelerator_catalogue_for, model_catalogue_for
from .models import AcceleratorAlias, Model, ModelAlias


class CatalogueRejected(ValueError):
    """An alias or a model that cannot be added as given; ``field`` names what to fix."""

    def __init__(self, message: str, *, field: str) -> None:
        self.message = message
        self.field = field
        super().__init__(message)


def model_alias_key(name: str) -> str:
    """The stored key of an alias: with its organisation when it names one (it then matches only
    that organisation's names)."""
    return model_key(name, keep_org=bool(split_org(name)[0]))


def model_alias_set(
    *, team: Team | None, name: str, model: Model, created_by: Any = None
) -> ModelAlias | None:
    """Make ``name`` resolve to ``model`` for ``team`` (None: every team); an existing alias of the
    same spelling is moved. None when the name already is the model's canonical name."""
    name = name.strip()
    if not name or len(name) > 200:
        raise CatalogueRejected("an alias needs 1 to 200 characters", field="name")
    canonical = model_catalogue_for(team=team).is_canonical(name)
    if canonical == model.name:
        return None
    if canonical is not None:
        raise CatalogueRejected(
            f"{name!r} is the name of the model {canonical!r}; an alias cannot take it", field="name"
        )
    key = model_alias_key(name)
    try:
        with transaction.atomic():
            alias, _ = ModelAlias.objects.update_or_create(
                team=team, key=key, defaults={"name": name, "model": model, "created_by": created_by}
            )
    except IntegrityError:  # a concurrent request added it: it now exists, move it
        alias = ModelAlias.objects.get(team=team, key=key)
        ModelAlias.objects.filter(pk=alias.pk).update(name=name, model=model)
    return alias


def accelerator_alias_set(
    *, team: Team | None, name: str, accelerator_type: AcceleratorType, created_by: Any = None
) -> AcceleratorAlias | None:
    """Make ``name`` resolve to ``accelerator_type`` for ``team`` (None: every team). None when the
    name already is the type's own name or slug."""
    name = " ".join(name.split())
    if not name or len(name) > 120:
        raise CatalogueRejected("an alias needs 1 to 120 characters", field="name")
    key = accelerator_key(name)
    if not key:
        raise CatalogueRejected(f"{name!r} has no words to match on", field="name")
    found = accelerator_catalogue_for(team=team).resolve(name)
    if found.how == "exact":
        if found.target == accelerator_type.slug:
            return None
        raise CatalogueRejected(
            f"{name!r} is the name of the accelerator type {found.target!r}; an alias cannot take it",
            field="name",
        )
    try:
        with transaction.atomic():
            alias, _ = AcceleratorAlias.objects.update_or_create(
                team=team,
                key=key,
                defaults={"name": name, "accelerator_type": accelerator_type, "created_by": created_by},
            )
    except IntegrityError:
        alias = AcceleratorAlias.objects.get(team=team, key=key)
        AcceleratorAlias.objects.filter(pk=alias.pk).update(name=name, accelerator_type=accelerator_type)
    return alias
