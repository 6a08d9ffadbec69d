"""``python -m accelboard.demo.live --server URL``: the demo fleet keeps reporting while the demo runs.

One process stands in for the host agent of every demo host: each ``--interval`` it samples every
GPU of every host and posts each host's batch to the real ingest API (``POST /api/v1/telemetry``)
in the agent's wire format (its sender: gzip, bearer token, ``batch_id``, host facts, the
``accelerators[]`` registration and the samples), with one ingest token per team, made here at
start. So the hosts page shows a live fleet, rolled up and costed by the product's own jobs.

The numbers follow each host's profile (serving follows the local day, training stays busy, batch
comes in waves, office is mostly idle), and continue from the loaded telemetry: each GPU's energy
counter goes on from its last loaded value. A few GPUs are unhealthy on purpose (``UNHEALTHY``):
one runs hot and slows down for heat, one is held back by a hardware slowdown, one reports XID and
ECC errors. Each batch also carries who held each GPU since the previous round (``attribution``,
docs/attribution.md): the same pods, MIG instances, time-sliced pods and Slurm jobs as the
loaded history (``accelboard.demo.attribution_generator``), cut at each batch. What is made here
is plain data; the server's ingest checks it like any agent's.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from . import attribution_generator

# NVML clocks-event reasons (the bits of ``accelboard.demo.generator``'s THROTTLE_*): idle, SW power cap, HW slowdown,
# SW thermal, HW thermal, HW power brake.
IDLE, POWER_CAP, HW_SLOWDOWN, SW_THERMAL, HW_THERMAL, POWER_BRAKE = 0x1, 0x4, 0x8, 0x20, 0x40, 0x80
# (host position in the fleet, GPU index, what is wrong with it): a few GPUs for the pages to flag.
UNHEALTHY = ((0, 0, "hot"), (1, 1, "slowdown"), (2, 2, "xid"))
TOKEN_NAME = "demo live fleet"


@dataclass
class Gpu:
    uuid: str
    index: int
    name: str
    serial: str
    memory_bytes: int
    power_limit_w: float
    energy_mj: float
    problem: str = ""
    mig_mode: bool = False
    parent_uuid: str = ""
    compute_slices: int | None = None

    def registration(self, driver_version: str) -> dict[str, Any]:
        slices = {} if self.compute_slices is None else {"compute_slices": self.compute_slices}
        return {
            **slices,
            "uuid": self.uuid,
            "index": self.index,
            "name": self.name,
            "serial": self.serial,
            "memory_bytes": self.memory_bytes,
            "power_limit_w": self.power_limit_w,
            "driver_version": driver_version,
            "mig_mode": self.mig_mode,
            "parent_uuid": self.parent_uuid,
            "unsupported": [],
        }


@dataclass
class LiveHost:
    hostname: str
    team_id: int
    profile: str
    tz_hours: float
    driver_version: str
    cuda_version: str
    facts: dict[str, Any]
    gpus: list[Gpu] = field(default_factory=list)
    sequence: int = 0
    team: str = ""  # the team's slug
    # MIG instances: registered with the host and held by pods, never sampled (NVML reads none).
    instances: list[Gpu] = field(default_factory=list)
    # The previous round's sample time and each GPU's utilisation then: who held what since.
    previous: tuple[float, dict[str, float]] | None = None

    def node(self) -> attribution_generator.Node:
        by_parent: dict[str, list[str]] = {}
        for instance in self.instances:
            by_parent.setdefault(instance.parent_uuid, []).append(instance.uuid)
        return attribution_generator.Node(
            hostname=self.hostname, team=self.team, profile=self.profile, instances=by_parent
        )


def load(now: float, t0: float, host: LiveHost, gpu: Gpu, rng: random.Random) -> float:
    """Busy fraction 0..1 of a GPU at ``now`` by its host's profile. Pure but for ``rng``."""
    local_hour = ((now / 3600.0) + host.tz_hours) % 24
    daily = 0.5 - 0.5 * math.cos((local_hour - 3.0) / 24.0 * 2 * math.pi)  # low at 03:00, high at 15:00
    if host.profile == "serving":
        base = 0.25 + 0.6 * daily
    elif host.profile == "training":
        base = 0.93
    elif host.profile == "batch":
        base = 0.85 if ((now - t0) / 300.0 + gpu.index / 8.0) % 1.0 < 0.6 else 0.05
    else:
        base = 0.35 if gpu.index == 0 and daily > 0.5 else 0.0
    return min(1.0, max(0.0, base + rng.gauss(0, 0.04))) if base > 0 else 0.0


def sample(now: float, t0: float, dt: float, host: LiveHost, gpu: Gpu, rng: random.Random) -> dict[str, Any]:
    """One GPU sample in the agent's fields; advances the GPU's energy counter by ``dt`` seconds."""
    busy = load(now, t0, host, gpu, rng)
    limit = gpu.power_limit_w
    idle_w = 0.1 * limit
    power = idle_w + (0.95 * limit - idle_w) * busy**0.85
    util = round(100.0 * busy, 1)
    temperature = 32.0 + 40.0 * power / limit + rng.gauss(0, 0.5)
    sm_clock = 1980.0 * (1 - 0.05 * busy) if busy > 0 else 345.0
    reasons = IDLE if busy == 0 else (POWER_CAP if power > 0.93 * limit else 0)
    xid = ecc = 0
    if gpu.problem == "hot":
        temperature = 91.0 + 2.5 * rng.random()
        sm_clock *= 0.62
        power *= 0.8
        reasons = (reasons & ~IDLE) | SW_THERMAL | HW_THERMAL
        util = max(util, 40.0)
    elif gpu.problem == "slowdown":
        sm_clock *= 0.55
        reasons = (reasons & ~IDLE) | HW_SLOWDOWN | POWER_BRAKE
        util = max(util, 30.0)
    elif gpu.problem == "xid":
        xid, ecc = 2, 14
    gpu.energy_mj += power * dt * 1000.0
    memory = gpu.memory_bytes
    used = int(memory * (0.9 if host.profile == "serving" else 0.05 + 0.8 * busy))
    return {
        "time": round(now, 3),
        "gpu": gpu.uuid,
        "power_w": round(power, 1),
        "energy_mj": int(gpu.energy_mj),
        "gpu_util": util,
        "mem_util": round(util * 0.5, 1),
        "mem_used_bytes": used,
        "mem_total_bytes": memory,
        "sm_clock_mhz": round(sm_clock),
        "mem_clock_mhz": 2619 if busy > 0 else 405,
        "temperature_c": round(temperature),
        "throttle_reasons": reasons,
        "ecc_errors": ecc,
        "xid_errors": xid,
    }


def attribution(host: LiveHost, start: float, end: float, utils: dict[str, float]) -> list[dict[str, Any]]:
    """The intervals [start, end) of the GPUs that were busy at ``start`` (their utilisation
    then in ``utils``), held as ``attribution_generator.holds`` says: pods, MIG instances' pods,
    the time-sliced GPU's two pods by their measured shares, Slurm jobs. Pure."""
    node = host.node()
    moment = int(start)
    # The live fleet's runs: a training job for six hours, a batch or notebook pod for an hour.
    run_start = moment - moment % (6 * 3600 if host.profile == "training" else 3600)
    intervals = []
    for gpu in host.gpus:
        util = utils.get(gpu.uuid, 0.0)
        if util <= 0:
            continue
        for hold in attribution_generator.holds(
            node=node, gpu_index=gpu.index, gpu_uuid=gpu.uuid, run_start=run_start
        ):
            if not attribution_generator.held_on(hold.workload, moment // attribution_generator.DAY):
                continue
            interval: dict[str, Any] = {
                "gpu": hold.device,
                "start": round(start, 3),
                "end": round(end, 3),
                "workload": hold.workload.wire(),
                "share": 1.0,
                "basis": "exclusive",
            }
            if hold.sliced is not None:
                share = attribution_generator.sliced_shares(host.hostname, moment - moment % 3600)[
                    hold.sliced
                ]
                interval.update(share=share, basis="measured", sm_util=round(share * util, 2))
            intervals.append(interval)
    return intervals


def batch(
    host: LiveHost,
    samples: list[dict[str, Any]],
    *,
    run_id: str,
    interval_s: float,
    intervals: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A telemetry batch as the agent's spool seals it (``accelboard_agent.spool.telemetry_seal``)."""
    host.sequence += 1
    return {
        "batch_id": f"{host.hostname[:80]}:{run_id}:{host.sequence:09d}",
        "host": {
            "hostname": host.hostname,
            "agent_version": "0.1.0",
            "driver_version": host.driver_version,
            "cuda_version": host.cuda_version,
            "simulated": True,
            "facts": {**host.facts, "interval_s": interval_s, "live": True},
        },
        "accelerators": [gpu.registration(host.driver_version) for gpu in [*host.gpus, *host.instances]],
        "samples": samples,
        **({"attribution": intervals} if intervals else {}),
    }


def fleet_read() -> tuple[list[LiveHost], dict[int, str]]:
    """The demo hosts and their GPUs from the database, and a fresh ingest token per team (the
    previous run's are revoked: a token is shown once, so each start makes its own)."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "accelboard.settings")
    django.setup()
    from django.db import connections

    from accelboard.api.models import ApiToken
    from accelboard.api.services import token_create, token_revoke
    from accelboard.core.models import Team
    from accelboard.fleet.models import Host

    from . import plan

    zones = {site["name"]: site["tz_hours"] for site in plan.SITES}
    hosts = []
    demo_hosts = (
        Host.objects.filter(facts__demo=True).select_related("site", "team").prefetch_related("accelerators")
    )
    for host in demo_hosts.order_by("hostname"):
        if host.team is None:
            continue
        gpus, instances = [], []
        # A MIG GPU's instances in the plan's order: largest first, then by UUID.
        for gpu in sorted(host.accelerators.all(), key=lambda g: (g.index, -(g.compute_slices or 0), g.uuid)):
            state = gpu.last_state or {}
            gpus.append(
                Gpu(
                    uuid=gpu.uuid,
                    index=gpu.index,
                    name=gpu.name,
                    serial=gpu.serial,
                    memory_bytes=int(gpu.memory_bytes or 80 * 2**30),
                    power_limit_w=float(gpu.power_limit_w or 700.0),
                    energy_mj=float(state.get("energy_mj") or 1.0e9),
                    mig_mode=gpu.mig_mode,
                    parent_uuid=gpu.parent_uuid,
                    compute_slices=gpu.compute_slices,
                )
            )
            if gpu.parent_uuid:
                instances.append(gpus.pop())
        facts = {key: value for key, value in (host.facts or {}).items() if key not in ("interval_s", "live")}
        hosts.append(
            LiveHost(
                hostname=host.hostname,
                team_id=host.team.pk,
                profile=str(facts.get("profile", "")),
                tz_hours=float(zones.get(host.site.name if host.site else "", 0)),
                driver_version=host.driver_version,
                cuda_version=host.cuda_version,
                facts=facts,
                gpus=gpus,
                team=host.team.slug,
                instances=instances,
            )
        )
    for position, index, problem in UNHEALTHY:
        if position < len(hosts) and index < len(hosts[position].gpus):
            hosts[position].gpus[index].problem = problem
    tokens = {}
    for old in ApiToken.objects.filter(name=TOKEN_NAME, revoked_at__isnull=True):
        token_revoke(prefix=old.prefix)
    for team in Team.objects.filter(pk__in={host.team_id for host in hosts}):
        _, tokens[team.pk] = token_create(team=team, kind="ingest", name=TOKEN_NAME)
    connections.close_all()
    return hosts, tokens


def run(
    *, server: str, interval_s: float, ticks: int | None = None, stop: threading.Event | None = None
) -> int:
    """Post every host's batch each ``interval_s`` until ``stop`` is set (or ``ticks`` rounds are
    done); return 1 if a round of ``ticks`` had a refused batch."""
    from accelboard_agent.sender import http_post  # the agent's own sender: gzip, bearer, status

    stop = stop or threading.Event()
    hosts, tokens = fleet_read()
    if not hosts:
        print("live fleet: no demo hosts in the database", file=sys.stderr)
        return 1
    rng = random.Random(7)
    run_id = f"live{int(time.time())}"
    t0 = last = time.time()
    gpus = sum(len(host.gpus) for host in hosts)
    problems = ", ".join(
        f"{h.hostname} GPU {g.index} {g.problem}" for h in hosts for g in h.gpus if g.problem
    )
    print(
        f"live fleet: {len(hosts)} hosts, {gpus} GPUs, every {interval_s:g} s; unhealthy: {problems}",
        flush=True,
    )
    failures = rounds = 0
    while not stop.is_set():
        now = time.time()
        dt = max(0.0, now - last)
        last = now
        for host in hosts:
            samples = [sample(now, t0, dt, host, gpu, rng) for gpu in host.gpus]
            intervals = attribution(host, host.previous[0], now, host.previous[1]) if host.previous else []
            host.previous = (now, {s["gpu"]: float(s["gpu_util"]) for s in samples})
            payload = json.dumps(
                batch(host, samples, run_id=run_id, interval_s=interval_s, intervals=intervals),
                separators=(",", ":"),
            )
            try:
                status, body = http_post(
                    f"{server}/api/v1/telemetry", token=tokens[host.team_id], payload=payload, timeout=10
                )
            except OSError as exc:
                status, body = 0, str(exc)
            if not 200 <= status < 300:
                failures += 1
                print(f"live fleet: {host.hostname}: {status} {body[:200]}", file=sys.stderr, flush=True)
        rounds += 1
        if ticks is not None and rounds >= ticks:
            return 1 if failures else 0
        stop.wait(max(0.0, now + interval_s - time.time()))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m accelboard.demo.live", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--server", required=True, help="the demo's own URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between samples (default 10)")
    args = parser.parse_args(argv)
    if args.interval <= 0:
        parser.error("--interval must be above 0")
    from accelboard_agent.daemon import install_signal_handlers, restore_signal_handlers

    stop = threading.Event()
    installed = install_signal_handlers(stop)  # not Event.set() in the handler: it can deadlock
    try:
        return run(server=args.server.rstrip("/"), interval_s=args.interval, stop=stop)
    finally:
        restore_signal_handlers(installed)


if __name__ == "__main__":
    sys.exit(main())
