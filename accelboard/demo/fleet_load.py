"""The demo load's first stages: people and logins, sites and the price book, hosts and GPUs.

Through the product's own services (``core.services`` for teams and people,
``fleet.host_services.host_register`` for hosts and GPUs); called by ``accelboard.demo.loader``.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password

from accelboard.core.choices import Role
from accelboard.core.models import Team
from accelboard.core.services import membership_set, team_create, user_create
from accelboard.costs.models import AcceleratorPrice, ElectricityPrice
from accelboard.fleet.host_services import host_register
from accelboard.fleet.models import Accelerator, AcceleratorType, Host, Site

from . import attribution_generator, generator, plan


def password_hashes(usernames: list[str]) -> dict[str, str]:
    """Each demo user's password hash, computed two at a time (PBKDF2 releases the GIL; the
    hasher's full work factor is kept, so the logins are as slow to attack as any)."""
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    with ThreadPoolExecutor(max_workers=2) as pool:
        hashes = pool.map(lambda name: make_password(plan.demo_password(name)), usernames)
        return dict(zip(usernames, hashes, strict=True))


def people_create(
    logins: list[dict[str, str]], hashes: dict[str, str]
) -> tuple[dict[str, Team], dict[str, Any]]:
    teams: dict[str, Team] = {}
    users: dict[str, Any] = {}
    # The rows first, with their hashes made in parallel; ``user_create`` then finds each one.
    User = get_user_model()
    User.objects.bulk_create(
        [
            User(username=name, password=password, email=f"{name}@demo.accelboard.invalid")
            for name, password in hashes.items()
        ],
        ignore_conflicts=True,
    )
    for entry in plan.TEAMS:
        team = team_create(name=entry["name"], slug=entry["slug"], description=entry["description"])
        teams[entry["slug"]] = team
        for role in plan.TEAM_ROLES:
            username = f"{entry['short']}-{role}"
            user = user_create(
                username=username,
                password=plan.demo_password(username),
                email=f"{username}@demo.accelboard.invalid",
            )
            membership_set(team=team, user=user, role=Role(role).value)
            users[username] = user
            logins.append(
                {
                    "username": username,
                    "password": plan.demo_password(username),
                    "role": role,
                    "team": entry["name"],
                }
            )
    admin = user_create(
        username=plan.ADMIN_USERNAME,
        password=plan.demo_password(plan.ADMIN_USERNAME),
        email="admin@demo.accelboard.invalid",
        is_staff=True,
    )
    # Staff alone cannot use Django's admin pages without permissions; the demo admin may do all.
    get_user_model().objects.filter(pk=admin.pk).update(is_staff=True, is_superuser=True)
    outsider = user_create(
        username=plan.OUTSIDER_USERNAME,
        password=plan.demo_password(plan.OUTSIDER_USERNAME),
        email="outsider@demo.accelboard.invalid",
    )
    users[plan.ADMIN_USERNAME] = admin
    users[plan.OUTSIDER_USERNAME] = outsider
    logins.append(
        {"username": "admin", "password": plan.demo_password("admin"), "role": "staff admin", "team": "-"}
    )
    logins.append(
        {"username": "outsider", "password": plan.demo_password("outsider"), "role": "no team", "team": "-"}
    )
    return teams, users


def sites_and_prices_create(config: generator.DemoConfig) -> dict[str, Site]:
    today = config.now.astimezone(UTC).date()
    sites: dict[str, Site] = {}
    for entry in plan.SITES:
        site, _ = Site.objects.update_or_create(
            name=entry["name"], defaults={"provider": entry["provider"], "region": entry["region"]}
        )
        sites[entry["key"]] = site
        ElectricityPrice.objects.create(
            site=site,
            price_per_kwh=Decimal(entry["price_per_kwh"]),
            pue=entry["pue"],
            carbon_g_per_kwh=entry["carbon_g_per_kwh"],
            source=entry["source"],
            fetched_on=today - timedelta(days=7),
            valid_from=date(2024, 1, 1),
        )
    types = {accel.slug: accel for accel in AcceleratorType.objects.all()}
    prices = []
    for entry in plan.PRICES:
        capex = Decimal(entry["capex"]) if "capex" in entry else None
        price = (
            (capex / entry["lifetime_hours"]).quantize(Decimal("0.0001"))
            if capex is not None
            else Decimal(entry["price"])
        )
        fetched = entry.get("fetched_on") or today - timedelta(days=entry["fetched_days_ago"])
        prices.append(
            AcceleratorPrice(
                accelerator_type=types[entry["gpu"]],
                accelerator_count=entry["count"],
                provider=entry["provider"],
                region=entry["region"],
                instance_type=entry["instance_type"],
                pricing_model=entry["pricing_model"],
                price_per_hour=price,
                capex=capex,
                lifetime_hours=entry.get("lifetime_hours"),
                source=entry["source"],
                fetched_on=fetched,
                valid_from=entry["valid_from"],
                valid_to=entry.get("valid_to"),
            )
        )
    AcceleratorPrice.objects.bulk_create(prices)
    return sites


# What each profile's spend is booked to in the cost report (Host.project).
_PROJECTS = {
    "serving": "chat-api",
    "batch": "batch-inference",
    "training": "foundation-models",
    "office": "notebooks",
}


def hosts_create(
    config: generator.DemoConfig,
    hosts: list[generator.HostPlan],
    teams: dict[str, Team],
    sites: dict[str, Site],
) -> tuple[dict[str, Accelerator], dict[str, int]]:
    """Register every host and GPU by UUID, as an agent's first batch would; GPUs by UUID."""
    seen = datetime.fromtimestamp(config.telemetry_end, UTC)
    gpus: dict[str, Accelerator] = {}
    host_ids: dict[str, int] = {}
    for host_plan in hosts:
        mig = {item["parent_uuid"] for item in _mig_registration(config, host_plan)}
        host, registered = host_register(
            hostname=host_plan.hostname,
            team_id=teams[host_plan.team].pk,
            facts={
                "demo": True,
                "profile": host_plan.profile,
                "os": "Ubuntu 22.04",
                "provider": host_plan.provider,
                "region": host_plan.region,
                "instance_type": host_plan.instance_type,
                "driver_version": host_plan.driver_version,
                "cuda_version": host_plan.cuda_version,
                "agent_version": "0.1.0",
                "simulated": True,
            },
            accelerators=[
                {
                    "uuid": gpu.uuid,
                    "index": gpu.index,
                    "name": gpu.name,
                    "serial": gpu.serial,
                    "memory_bytes": gpu.memory_bytes,
                    "power_limit_w": gpu.power_limit_w,
                    "driver_version": host_plan.driver_version,
                    **(
                        {"mig_mode": True, "compute_slices": plan.MIG["total_slices"]}
                        if gpu.uuid in mig
                        else {}
                    ),
                }
                for gpu in host_plan.gpus
            ]
            + _mig_registration(config, host_plan),
            seen_at=seen,
        )
        Host.objects.filter(pk=host.pk).update(
            site=sites[host_plan.site], project=_PROJECTS.get(host_plan.profile, "")
        )
        gpus.update(registered)
        host_ids[host_plan.hostname] = host.pk
    # A MIG instance is named as its GPU (as the agent names it), so it would match the GPU's
    # accelerator type and count as one more GPU of it (a benchmark run's GPUs, a host's price).
    Accelerator.objects.filter(host_id__in=host_ids.values()).exclude(parent_uuid="").update(
        accelerator_type=None
    )
    return gpus, host_ids


def _mig_registration(config: generator.DemoConfig, host_plan: generator.HostPlan) -> list[dict[str, Any]]:
    """The host's MIG GPUs (``plan.MIG``): the GPU with its total slices, and its instances, as an
    agent with an attribution source on lists them."""
    instances = attribution_generator.mig_instances(
        config.seed, host_plan.hostname, [(gpu.index, gpu.uuid, gpu.memory_bytes) for gpu in host_plan.gpus]
    )
    items: list[dict[str, Any]] = []
    for gpu in host_plan.gpus:
        for instance in instances.get(gpu.uuid, []):
            items.append(
                {
                    "uuid": instance.uuid,
                    "index": gpu.index,
                    "name": gpu.name,
                    "memory_bytes": instance.memory_bytes,
                    "driver_version": host_plan.driver_version,
                    "mig_mode": True,
                    "parent_uuid": gpu.uuid,
                    "compute_slices": instance.slices,
                }
            )
    return items
