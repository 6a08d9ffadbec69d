"""Writes of hosts and their GPUs: registration keyed by (team, hostname) and GPU UUID."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from django.db import transaction

from .catalogue_services import accelerator_type_match
from .models import Accelerator, Host

# The facts a host's registration keeps in its own columns (the rest stay in ``facts``).
HOST_FIELDS = (
    "driver_version",
    "cuda_version",
    "agent_version",
    "provider",
    "region",
    "instance_type",
    "simulated",
)


def host_register(
    *,
    hostname: str,
    team_id: int | None,
    facts: dict[str, object] | None = None,
    accelerators: Sequence[dict[str, object]] = (),
    seen_at: datetime | None = None,
) -> tuple[Host, dict[str, Accelerator]]:
    """Create or update the team's host of this name and its GPUs; return the host and its GPUs
    by UUID.

    A name resolves within the team only: another team's host of the same name is neither used
    nor looked at, so registering never fails, nor answers differently, because of it.
    ``team_id=None`` (fixtures, the demo) names the host with no team.
    A GPU that moved to another host (re-seated card) follows its UUID. Facts not given are kept.
    ``accelerators`` items: uuid (required), index, name, serial, memory_bytes, power_limit_w,
    driver_version, mig_mode, parent_uuid, compute_slices, unsupported.
    """
    facts = dict(facts or {})
    seen_at = seen_at or datetime.now(UTC)
    host_fields: dict[str, Any] = {key: facts.pop(key) for key in HOST_FIELDS if key in facts}
    with transaction.atomic():
        team: dict[str, Any] = {"team_id": team_id} if team_id is not None else {"team__isnull": True}
        host, created = Host.objects.select_for_update().get_or_create(
            hostname=hostname,
            **team,
            defaults={"team_id": team_id, **host_fields, "facts": facts, "last_seen_at": seen_at},
        )
        if not created:
            changed: dict[str, Any] = {
                key: value for key, value in host_fields.items() if getattr(host, key) != value
            }
            if facts and {**host.facts, **facts} != host.facts:
                changed["facts"] = {**host.facts, **facts}
            if host.last_seen_at is None or seen_at > host.last_seen_at:
                changed["last_seen_at"] = seen_at
            for key, value in changed.items():
                setattr(host, key, value)
            if changed:
                host.save(update_fields=list(changed))
        existing = {
            gpu.uuid: gpu for gpu in Accelerator.objects.filter(uuid__in=[a["uuid"] for a in accelerators])
        }
        result: dict[str, Accelerator] = {}
        for item in accelerators:
            gpu_uuid = str(item["uuid"])
            fields: dict[str, Any] = {
                key: item[key]
                for key in (
                    "index",
                    "name",
                    "serial",
                    "memory_bytes",
                    "power_limit_w",
                    "driver_version",
                    "mig_mode",
                    "parent_uuid",
                    "compute_slices",
                    "unsupported",
                )
                if key in item and item[key] is not None
            }
            gpu = existing.get(gpu_uuid)
            if gpu is None:
                # A MIG instance is a slice of its GPU, not a GPU of the type its name carries: it
                # gets no type, so nothing that counts or prices GPUs by type counts it twice.
                accel_type = (
                    None
                    if item.get("parent_uuid")
                    else accelerator_type_match(name=str(item.get("name", "")))
                )
                gpu = Accelerator.objects.create(
                    uuid=gpu_uuid, host=host, accelerator_type=accel_type, last_seen_at=seen_at, **fields
                )
            else:
                changed_gpu: dict[str, Any] = {
                    key: value for key, value in fields.items() if getattr(gpu, key) != value
                }
                if gpu.host_id != host.pk:
                    changed_gpu["host_id"] = host.pk
                for key, value in changed_gpu.items():
                    setattr(gpu, key, value)
                if changed_gpu:
                    gpu.save(update_fields=list(changed_gpu))
            result[gpu_uuid] = gpu
    return host, result
