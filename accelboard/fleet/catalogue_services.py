"""Writes of the accelerator-type catalogue: the default types' upsert, an uploader's new type,
and the match of a driver-reported model name to a type (used when a GPU registers).

The default types themselves are pure data in ``catalogue.ACCELERATOR_TYPES``.
``accelerator_types_sync`` is safe to run twice and usable from a data migration
(``accelerator_types_sync(apps)`` with the migration's historical ``apps``).
"""

from __future__ import annotations

from typing import Any

from django.utils.text import slugify

from .catalogue import ACCELERATOR_TYPES
from .choices import FormFactor, Vendor
from .models import AcceleratorType


def accelerator_type_match(*, name: str) -> AcceleratorType | None:
    """The accelerator type whose ``match_names`` (or name) occur in a driver-reported model name."""
    lowered = name.lower()
    best: tuple[int, AcceleratorType] | None = None
    for accel_type in AcceleratorType.objects.all():
        for candidate in [accel_type.name, *accel_type.match_names]:
            if candidate and candidate.lower() in lowered:
                if best is None or len(candidate) > best[0]:
                    best = (len(candidate), accel_type)
    return best[1] if best else None


class AcceleratorTypeRejected(ValueError):
    """A new accelerator type that cannot be added as given; ``field`` names what to fix."""

    def __init__(self, message: str, *, field: str) -> None:
        self.message = message
        self.field = field
        super().__init__(message)


def accelerator_type_create(
    *,
    name: str,
    vendor: str,
    product: str = "",
    form_factor: str = "",
    memory_bytes: int | None = None,
    board_power_w: float | None = None,
) -> AcceleratorType:
    """Add an accelerator type to the catalogue (an uploader's new hardware); its slug comes from
    its name. Raises ``AcceleratorTypeRejected`` naming the field (a taken name, a bad vendor)."""
    name = " ".join(name.split())
    slug = slugify(name)[:80]
    if not name or not slug or len(name) > 80:
        raise AcceleratorTypeRejected("give the type a name of 1 to 80 characters", field="name")
    if vendor not in Vendor.values:
        raise AcceleratorTypeRejected(f"vendor must be one of {', '.join(Vendor.values)}", field="vendor")
    if form_factor and form_factor not in FormFactor.values:
        raise AcceleratorTypeRejected(
            f"form factor must be one of {', '.join(FormFactor.values)}", field="form_factor"
        )
    if memory_bytes is not None and not 0 < memory_bytes <= 16 * 1024**4:
        raise AcceleratorTypeRejected("memory must be between 0 and 16 TiB", field="memory")
    if board_power_w is not None and not 0 < board_power_w <= 10_000:
        raise AcceleratorTypeRejected("board power must be between 0 and 10,000 W", field="board_power_w")
    if (
        AcceleratorType.objects.filter(name__iexact=name).exists()
        or AcceleratorType.objects.filter(slug=slug).exists()
    ):
        raise AcceleratorTypeRejected(f"an accelerator type named {name!r} exists: pick it", field="name")
    return AcceleratorType.objects.create(
        name=name,
        slug=slug,
        vendor=vendor,
        product=product.strip()[:40],
        form_factor=form_factor,
        memory_bytes=memory_bytes,
        board_power_w=board_power_w,
    )


_FIELDS = (
    "name",
    "vendor",
    "product",
    "form_factor",
    "architecture",
    "memory_bytes",
    "board_power_w",
    "match_names",
)


def accelerator_types_sync(apps: Any = None) -> dict[str, int]:
    """Upsert ``ACCELERATOR_TYPES`` by slug; return {"created": n, "updated": n}.

    A row found by name under another slug (created by hand) is adopted and given the catalogue
    slug, rather than failing on the unique name. ``apps`` is a migration's app registry; without
    it the current model is used.
    """
    model = AcceleratorType if apps is None else apps.get_model("fleet", "AcceleratorType")
    created = updated = 0
    # A data migration's historical model may predate some fields (product, form factor).
    present = {field.name for field in model._meta.get_fields()}
    for entry in ACCELERATOR_TYPES:
        values = {field: entry[field] for field in _FIELDS if field in present}
        row = (
            model.objects.filter(slug=entry["slug"]).first()
            or model.objects.filter(name=entry["name"]).first()
        )
        if row is None:
            model.objects.create(slug=entry["slug"], **values)
            created += 1
            continue
        changed = {
            key: value
            for key, value in {"slug": entry["slug"], **values}.items()
            if getattr(row, key) != value
        }
        if changed:
            for key, value in changed.items():
                setattr(row, key, value)
            row.save(update_fields=list(changed))
            updated += 1
    return {"created": created, "updated": updated}
