"""The demo's simulated CI: benchmark runs of a slower commit, posted through the API like real CI.

A newcomer running the demo should see, within minutes, the email a team lead gets when a
commit slows a model down. Nothing is faked past the API: the runs go through ``POST
/api/v1/runs`` with a token, the detector finds the change on the worker, and the email is
planned, drawn and sent (to the outbox in the demo) by the same code as in production.

1. **Template**: the team's newest run of the workload and hardware it has most runs of (what
   its CI benchmarks routinely). Each posted run copies its model, variant, workload, hardware
   and metrics.
2. **The regression**: latency metrics (lower is better, in ms) are ``LATENCY_FACTOR`` times
   the template's, throughput metrics (higher is better, per second) ``THROUGHPUT_FACTOR`` times;
   the others are unchanged. Every value gets a little deterministic noise (``seed``), and
   within-run samples, where the template has them, are scaled the same way.
3. **Posting**: one run per commit, ``interval`` apart, until the detector has opened an alert on
   one of them or ``max_runs`` are posted: a single result is never an alert (it could be an
   outlier), so it usually takes two or three.

The template is read by ``selectors.simulated_ci_template``; this module only builds and posts.
"""

from __future__ import annotations

import json
import random
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

LATENCY_FACTOR = 1.21
THROUGHPUT_FACTOR = 0.86
NOISE = 0.004
USER_AGENT = "accelboard-simulated-ci/1"


class SimulatedCIError(Exception):
    """The simulated CI cannot post (no template run, the server refused); the message says why."""


@dataclass(frozen=True)
class MetricTemplate:
    name: str
    value: float
    unit: str
    direction: str
    samples: tuple[float, ...] = ()


@dataclass(frozen=True)
class RunTemplate:
    model: str
    variant: str
    precision: str
    quantization_method: str
    workload: dict[str, Any]
    accelerator: str
    accelerator_count: int
    metrics: tuple[MetricTemplate, ...]


def regression_factor(metric: MetricTemplate) -> float:
    """How much worse the simulated commit makes this metric (1.0: untouched)."""
    if metric.direction == "lower" and metric.unit in ("ms", "s"):
        return LATENCY_FACTOR
    if metric.direction == "higher" and metric.unit.endswith("/s"):
        return THROUGHPUT_FACTOR
    return 1.0


def run_payload(
    template: RunTemplate, *, commit: str, started_at: datetime, seed: int, ci_url: str = ""
) -> dict[str, Any]:
    """The API body of one regressed run (pure: same inputs, same body but for a fresh run id)."""
    rng = random.Random(seed)
    metrics = []
    for metric in template.metrics:
        factor = regression_factor(metric) * (1 + rng.gauss(0, NOISE))
        entry: dict[str, Any] = {
            "name": metric.name,
            "value": metric.value * factor,
            "unit": metric.unit,
            "direction": metric.direction,
        }
        if metric.samples:
            entry["samples"] = [s * factor for s in metric.samples]
        metrics.append(entry)
    return {
        "run_id": str(uuid.uuid4()),
        "model": template.model,
        "variant": {
            "name": template.variant,
            "precision": template.precision,
            "quantization_method": template.quantization_method,
        },
        "workload": template.workload,
        "hardware": {"accelerator": template.accelerator, "count": template.accelerator_count},
        "provenance": {"git_commit": commit, "branch": "main", "ci_url": ci_url},
        "started_at": started_at.isoformat(),
        "metrics": metrics,
        "context": {"source": "accelboard demo: simulated CI"},
    }


def run_post(*, server: str, token: str, payload: dict[str, Any], timeout: float = 30.0) -> dict[str, Any]:
    """POST one run to ``server``'s API; the server's JSON answer, or ``SimulatedCIError``."""
    request = urllib.request.Request(
        server.rstrip("/") + "/api/v1/runs",
        data=json.dumps(payload).encode(),
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
        },
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - our server
            return dict(json.loads(response.read() or b"{}"))
    except urllib.error.HTTPError as exc:
        body = exc.read().decode(errors="replace")[:500]
        raise SimulatedCIError(f"the server refused the run: HTTP {exc.code}: {body}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise SimulatedCIError(f"cannot reach {server}: {exc}") from None


def commit_for(number: int, *, seed: int) -> str:
    """A commit hash for the n-th simulated commit (stable for a seed)."""
    return uuid.UUID(int=random.Random(seed * 1000 + number).getrandbits(128)).hex + "00000000"


def regression_post(
    *,
    server: str,
    token: str,
    template: RunTemplate,
    alerted: Callable[[list[int]], list[int]],
    interval_s: float = 20.0,
    max_runs: int = 4,
    seed: int = 20959,
    ci_url: str = "",
    say: Callable[[str], None] = print,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[list[int], list[int]]:
    """Post regressed runs until ``alerted`` (run ids -> ids of alerts whose first bad run is one
    of them) finds an alert; returns (posted run ids, alert ids)."""
    posted: list[int] = []
    for number in range(1, max_runs + 1):
        commit = commit_for(number, seed=seed)
        payload = run_payload(
            template, commit=commit, started_at=datetime.now(UTC), seed=seed + number, ci_url=ci_url
        )
        answer = run_post(server=server, token=token, payload=payload)
        posted.append(int(answer["id"]))
        say(
            f"simulated CI: posted run #{answer['id']} of commit {commit[:8]} ({template.model} {template.variant})"
        )
        # The detector runs on the worker once the run is committed; give it the interval.
        sleep(interval_s)
        found = alerted(posted)
        if found:
            return posted, found
    return posted, []
