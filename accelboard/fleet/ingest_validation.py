"""Validation of a telemetry batch, without touching the database: ``telemetry_batch_parse``.

A decoded JSON payload (docs/api-contract.md) becomes a ``TelemetryBatch``, or an ``IngestRejected``
naming the first bad field. Samples are checked column by column (one list per field, then
``set(map(type, column))`` and min/max), because a pydantic model per sample costs ~20 µs and a
batch holds up to 10,000 of them. Only when a column fails does a slow per-sample pass run, to
name the FIRST bad sample and field (``samples[17].power_w``), which is what the client needs to
fix its payload. ``IngestRejected``, ``time_parse`` and ``json_bounded`` serve the API's other
write endpoints too.

Orjson (used by the API to decode bodies) refuses NaN and Infinity, so every float reaching this
module is finite; the checks here still bound each field so that a float4 column cannot overflow.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from operator import itemgetter
from typing import Any

import orjson

from accelboard.importers.hostnames import hostname_problem

from .choices import Provider
from .partials import PROFILING_FIELDS

# The largest batch: 10,000 samples (1,250 seconds of 8 GPUs) are stored in well under a second
# on a loaded 2-core node, inside the agent's 10 s request timeout with a margin for a burst of
# them (50,000 took 14-64 s under 20 concurrent posts). The agent seals at most 5,000.
MAX_SAMPLES = 10_000
MAX_ACCELERATORS = 1_024
# A clock that runs ahead is a broken agent, not data from the future.
MAX_FUTURE = timedelta(minutes=5)
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
_EARLIEST_EPOCH = EARLIEST.timestamp()
_INT64_MAX = 2**63 - 1
_INT32_MAX = 2**31 - 1

# name -> (integer only, lowest, highest). Bounds keep values physical and inside the column type
# (float4 overflows near 3.4e38; the int columns are int8/int4).
SAMPLE_FIELDS: dict[str, tuple[bool, float, float]] = {
    "power_w": (False, 0.0, 100_000.0),
    "energy_mj": (True, 0, _INT64_MAX),
    "gpu_util": (False, 0.0, 100.0),
    "mem_util": (False, 0.0, 100.0),
    "mem_used_bytes": (True, 0, _INT64_MAX),
    "mem_total_bytes": (True, 0, _INT64_MAX),
    "sm_clock_mhz": (False, 0.0, 100_000.0),
    "mem_clock_mhz": (False, 0.0, 100_000.0),
    "temperature_c": (False, -273.15, 1_000.0),
    "throttle_reasons": (True, 0, _INT64_MAX),
    "ecc_errors": (True, 0, _INT64_MAX),
    "xid_errors": (True, 0, _INT32_MAX),
    # The framebuffer's free and reserved parts: dcgm-exporter sends used, free and reserved as
    # separate series, whose sum is mem_total_bytes also when they come in different requests.
    "mem_free_bytes": (True, 0, _INT64_MAX),
    "mem_reserved_bytes": (True, 0, _INT64_MAX),
    # DCGM profiling counters (DCGM_FI_PROF_*), in % of time or cycles (DCGM's ratio x 100). Up to
    # 1,000: DCGM reports more than 100 % for some MIG instances (NVIDIA/DCGM#152), kept as sent
    # rather than refusing a whole remote-write request (which Prometheus would drop).
    **{name: (False, 0.0, 1_000.0) for name in PROFILING_FIELDS},
    # PCIe replays and remapped DRAM rows: counters since the driver loaded.
    "pcie_replay_errors": (True, 0, _INT64_MAX),
    "remapped_rows_correctable": (True, 0, _INT64_MAX),
    "remapped_rows_uncorrectable": (True, 0, _INT64_MAX),
}
SAMPLE_KEYS = frozenset({"time", "gpu", *SAMPLE_FIELDS})

_NONE = type(None)
_INT_TYPES = frozenset({int, _NONE})
_NUMBER_TYPES = frozenset({int, float, _NONE})

HOST_STRINGS = {"hostname": 255, "agent_version": 20, "driver_version": 40, "cuda_version": 20}
HOST_KEYS = frozenset({*HOST_STRINGS, "simulated", "facts"})
# Facts that ``host_register`` promotes to Host columns: they must fit those columns.
FACT_STRINGS = {"region": 40, "instance_type": 60, **HOST_STRINGS}
ACCELERATOR_STRINGS = {"uuid": 96, "name": 120, "serial": 64, "driver_version": 40, "parent_uuid": 96}
ACCELERATOR_KEYS = frozenset(
    {
        *ACCELERATOR_STRINGS,
        "index",
        "memory_bytes",
        "power_limit_w",
        "mig_mode",
        "unsupported",
        "compute_slices",
    }
)
# A GPU's compute slices (7 on A100 and H100), or a MIG instance's share of them.
MAX_COMPUTE_SLICES = 64
# ``attribution`` is read by ``attribution_validation`` (docs/attribution.md).
BATCH_KEYS = frozenset({"batch_id", "host", "accelerators", "samples", "attribution"})


class IngestRejected(Exception):
    """Input that cannot be stored: the API answers ``status`` with code, message and field path."""

    def __init__(self, message: str, *, path: str = "", code: str = "invalid", status: int = 422) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.code = code
        self.status = status
        # Which batch of several (``ingest_services.telemetry_batches_ingest``) was refused.
        self.index: int | None = None


# UTC offsets in use run from -12:00 to +14:00; beyond that a time is a typo (PostgreSQL refuses
# some of them outright).
MAX_UTC_OFFSET = timedelta(hours=14)


def utc_offset_check(moment: datetime, *, path: str) -> None:
    """Refuse a time whose UTC offset no place on Earth uses (``+16:00``, ``+23:59``)."""
    offset = moment.utcoffset()
    if offset is not None and abs(offset) > MAX_UTC_OFFSET:
        raise IngestRejected("UTC offset must be between -14:00 and +14:00", path=path, code="invalid_time")


def time_parse(value: object, *, path: str, now: datetime | None = None) -> float:
    """An RFC 3339 string with a timezone, or Unix epoch seconds, as epoch seconds (bounded)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise IngestRejected(
            "must be an RFC 3339 time with a timezone or Unix epoch seconds", path=path, code="type"
        )
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
            naive = moment.tzinfo is None
            epoch = moment.timestamp()
        except (ValueError, OverflowError):
            raise IngestRejected(
                f"{value[:40]!r} is not an RFC 3339 time", path=path, code="invalid_time"
            ) from None
        if naive:
            raise IngestRejected("time needs a timezone (Z or +hh:mm)", path=path, code="invalid_time")
        utc_offset_check(moment, path=path)
    else:
        epoch = float(value)
    _time_check(epoch, path=path, now=now)
    return epoch


def _time_check(epoch: float, *, path: str, now: datetime | None) -> None:
    limit = (now or datetime.now(UTC)) + MAX_FUTURE
    if not math.isfinite(epoch) or epoch < _EARLIEST_EPOCH:
        raise IngestRejected("time is before 2000-01-01", path=path, code="time_out_of_range")
    if epoch > limit.timestamp():
        raise IngestRejected(
            "time is more than 5 minutes in the future (check the agent's clock)",
            path=path,
            code="time_out_of_range",
        )


def _string(value: object, *, path: str, max_length: int, required: bool = False) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise IngestRejected("must be a string", path=path, code="type")
    if required and not value:
        raise IngestRejected("must not be empty", path=path, code="invalid")
    if len(value) > max_length:
        raise IngestRejected(f"must be at most {max_length} characters", path=path, code="too_long")
    return value


def _object(value: object, *, path: str, keys: frozenset[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise IngestRejected("must be an object", path=path, code="type")
    unknown = sorted(set(value) - keys)
    if unknown:
        where = f"{path}.{unknown[0]}" if path else unknown[0]
        raise IngestRejected(f"unknown field {unknown[0]!r}", path=where, code="unknown_field")
    return value


# Free-form JSON a client sends (host facts, a run's context and options) is stored as jsonb and
# shown on pages: bounded in depth and in size, so one request cannot store megabytes per row.
MAX_JSON_DEPTH = 32
MAX_JSON_BYTES = 64 * 1024


def json_bounded(value: Any, *, path: str) -> None:
    """Refuse ``value`` nested deeper than ``MAX_JSON_DEPTH`` or larger than ``MAX_JSON_BYTES`` as
    JSON (422 ``too_deep`` / ``too_large`` naming ``path``). Iterative: a 1,000-deep value is
    refused, not a ``RecursionError``."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if level >= MAX_JSON_DEPTH:
            raise IngestRejected(f"nested deeper than {MAX_JSON_DEPTH} levels", path=path, code="too_deep")
        stack.extend((child, level + 1) for child in children)
    try:
        size = len(orjson.dumps(value))
    except TypeError:  # an integer beyond 64 bits (not from a JSON body orjson decoded)
        size = len(json.dumps(value))
    if size > MAX_JSON_BYTES:
        raise IngestRejected(
            f"is {size:,} bytes as JSON; at most {MAX_JSON_BYTES // 1024} KiB", path=path, code="too_large"
        )


def _integer(value: object, *, path: str, lowest: int, highest: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise IngestRejected("must be an integer", path=path, code="type")
    if not lowest <= value <= highest:
        raise IngestRejected(f"must be between {lowest} and {highest}", path=path, code="out_of_range")
    return value


@dataclass
class TelemetryBatch:
    """A validated batch: host fields, GPU registrations, and the samples as columns."""

    batch_id: str
    hostname: str
    host_facts: dict[str, Any]
    accelerators: list[dict[str, Any]]
    gpus: list[str] = field(default_factory=list)
    epochs: list[float] = field(default_factory=list)
    columns: dict[str, list[Any]] = field(default_factory=dict)
    samples: list[dict[str, Any]] = field(default_factory=list)

    @property
    def registration_digest(self) -> str:
        """What this batch registers (host facts and GPUs), as a short digest: a batch equal to
        the last one seen for its host needs no registration (``ingest_services``)."""
        try:
            text = orjson.dumps([self.host_facts, self.accelerators], option=orjson.OPT_SORT_KEYS)
        except TypeError:  # an integer beyond 64 bits in the facts
            text = json.dumps([self.host_facts, self.accelerators], sort_keys=True).encode()
        return hashlib.blake2b(text, digest_size=16).hexdigest()

    @property
    def start(self) -> datetime | None:
        return datetime.fromtimestamp(min(self.epochs), UTC) if self.epochs else None

    @property
    def end(self) -> datetime | None:
        return datetime.fromtimestamp(max(self.epochs), UTC) if self.epochs else None


def _host_parse(value: object) -> tuple[str, dict[str, Any]]:
    host = _object(value, path="host", keys=HOST_KEYS)
    hostname = _string(host.get("hostname"), path="host.hostname", max_length=255, required=True)
    problem = hostname_problem(hostname)
    if problem is not None:
        raise IngestRejected(problem, path="host.hostname", code="invalid")
    facts_in = host.get("facts")
    if facts_in is None:
        facts_in = {}
    if not isinstance(facts_in, dict):
        raise IngestRejected("must be an object", path="host.facts", code="type")
    json_bounded(facts_in, path="host.facts")
    facts = dict(facts_in)
    for key, max_length in FACT_STRINGS.items():
        if key in facts and key != "hostname":
            _string(facts[key], path=f"host.facts.{key}", max_length=max_length)
    if "provider" in facts and facts["provider"] not in Provider.values:
        raise IngestRejected(
            f"must be one of {', '.join(Provider.values)}", path="host.facts.provider", code="invalid"
        )
    if "simulated" in facts and not isinstance(facts["simulated"], bool):
        raise IngestRejected("must be true or false", path="host.facts.simulated", code="type")
    facts.pop("hostname", None)
    for key in ("agent_version", "driver_version", "cuda_version"):
        if host.get(key) is not None:
            facts[key] = _string(host[key], path=f"host.{key}", max_length=HOST_STRINGS[key])
    if host.get("simulated") is not None:
        if not isinstance(host["simulated"], bool):
            raise IngestRejected("must be true or false", path="host.simulated", code="type")
        facts["simulated"] = host["simulated"]
    return hostname, facts


def _accelerators_parse(value: object) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise IngestRejected("must be a list", path="accelerators", code="type")
    if len(value) > MAX_ACCELERATORS:
        raise IngestRejected(
            f"at most {MAX_ACCELERATORS} accelerators per batch", path="accelerators", code="too_many"
        )
    parsed: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, item in enumerate(value):
        path = f"accelerators[{i}]"
        gpu = _object(item, path=path, keys=ACCELERATOR_KEYS)
        out: dict[str, Any] = {}
        for key, max_length in ACCELERATOR_STRINGS.items():
            if key == "uuid" or gpu.get(key) is not None:
                out[key] = _string(
                    gpu.get(key), path=f"{path}.{key}", max_length=max_length, required=key == "uuid"
                )
        if out["uuid"] in seen:
            raise IngestRejected("this GPU UUID is listed twice", path=f"{path}.uuid", code="duplicate")
        seen.add(out["uuid"])
        if gpu.get("index") is not None:
            out["index"] = _integer(gpu["index"], path=f"{path}.index", lowest=0, highest=32_767)
        if gpu.get("memory_bytes") is not None:
            out["memory_bytes"] = _integer(
                gpu["memory_bytes"], path=f"{path}.memory_bytes", lowest=0, highest=_INT64_MAX
            )
        if gpu.get("power_limit_w") is not None:
            limit = gpu["power_limit_w"]
            if isinstance(limit, bool) or not isinstance(limit, int | float) or not 0 <= limit <= 100_000:
                raise IngestRejected(
                    "must be a number between 0 and 100000", path=f"{path}.power_limit_w", code="type"
                )
            out["power_limit_w"] = float(limit)
        if gpu.get("compute_slices") is not None:
            out["compute_slices"] = _integer(
                gpu["compute_slices"], path=f"{path}.compute_slices", lowest=1, highest=MAX_COMPUTE_SLICES
            )
        if gpu.get("mig_mode") is not None:
            if not isinstance(gpu["mig_mode"], bool):
                raise IngestRejected("must be true or false", path=f"{path}.mig_mode", code="type")
            out["mig_mode"] = gpu["mig_mode"]
        if gpu.get("unsupported") is not None:
            unsupported = gpu["unsupported"]
            if not isinstance(unsupported, list) or not all(
                isinstance(name, str) and len(name) <= 64 for name in unsupported
            ):
                raise IngestRejected(
                    "must be a list of signal names", path=f"{path}.unsupported", code="type"
                )
            out["unsupported"] = unsupported
        parsed.append(out)
    return parsed


def _sample_error(samples: list[Any], now: datetime) -> IngestRejected:
    """The first bad sample and field: the slow path, run only once a column check has failed."""
    for i, sample in enumerate(samples):
        path = f"samples[{i}]"
        try:
            _object(sample, path=path, keys=SAMPLE_KEYS)
            if sample.get("time") is None:
                raise IngestRejected("is required", path=f"{path}.time", code="missing")
            time_parse(sample["time"], path=f"{path}.time", now=now)
            _string(sample.get("gpu"), path=f"{path}.gpu", max_length=96, required=True)
            for name, (integer, lowest, highest) in SAMPLE_FIELDS.items():
                value = sample.get(name)
                if value is None:
                    continue
                where = f"{path}.{name}"
                if integer:
                    _integer(value, path=where, lowest=int(lowest), highest=int(highest))
                    continue
                if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                    raise IngestRejected("must be a finite number", path=where, code="type")
                if not lowest <= value <= highest:
                    raise IngestRejected(
                        f"must be between {lowest:g} and {highest:g}", path=where, code="out_of_range"
                    )
        except IngestRejected as exc:
            return exc
    # The column checks and this pass disagree: a bug here, not the client's fault.
    raise AssertionError("a sample column failed its check but no sample did")


def _samples_parse(value: object, now: datetime) -> tuple[list[str], list[float], dict[str, list[Any]]]:
    if value is None:
        value = []
    if not isinstance(value, list):
        raise IngestRejected("must be a list", path="samples", code="type")
    samples: list[Any] = value
    if len(samples) > MAX_SAMPLES:
        raise IngestRejected(
            f"at most {MAX_SAMPLES} samples per batch (got {len(samples)})", path="samples", code="too_many"
        )
    if not samples:
        return [], [], {name: [] for name in SAMPLE_FIELDS}
    if set(map(type, samples)) != {dict}:
        raise _sample_error(samples, now)
    # An agent's samples all carry the same keys: then their columns are taken in one C pass
    # (``itemgetter`` and ``zip``) instead of a ``sample.get`` per field and sample. Each sample as
    # long as the first holds exactly its keys when it holds them all (else a ``KeyError``).
    keys = tuple(samples[0])
    carried = set(keys)
    given: dict[str, list[Any]] = {}
    if len(keys) > 1 and carried <= SAMPLE_KEYS and set(map(len, samples)) == {len(keys)}:
        try:
            rows = list(map(itemgetter(*keys), samples))
        except KeyError:
            pass
        else:
            given = dict(zip(keys, map(list, zip(*rows, strict=True)), strict=True))
    if not given:
        # The keys any sample carries: all known exactly when each sample's are.
        carried = set().union(*samples)
        if not carried <= SAMPLE_KEYS:
            raise _sample_error(samples, now)

    gpus = given.get("gpu") or [sample.get("gpu") for sample in samples]
    gpu_types = set(map(type, gpus))
    if gpu_types != {str} or not all(gpus) or max(map(len, set(gpus))) > 96:
        raise _sample_error(samples, now)

    times = given.get("time") or [sample.get("time") for sample in samples]
    time_types = set(map(type, times))
    if time_types <= {int, float}:
        epochs = times if time_types == {float} else [float(t) for t in times]
    elif time_types <= {int, float, str}:
        # Strings are parsed one by one; repeated stamps (8 GPUs at one instant) are parsed once.
        parsed: dict[Any, float] = {}
        try:
            for stamp in set(times):
                if type(stamp) is str:
                    moment = datetime.fromisoformat(stamp)
                    offset = moment.utcoffset()
                    if offset is None or abs(offset) > MAX_UTC_OFFSET:  # naive, or no place's offset
                        raise ValueError(stamp)
                    parsed[stamp] = moment.timestamp()
                else:
                    parsed[stamp] = float(stamp)
        except (ValueError, OverflowError):
            raise _sample_error(samples, now) from None
        epochs = [parsed[t] for t in times]
    else:
        raise _sample_error(samples, now)
    if min(epochs) < _EARLIEST_EPOCH or max(epochs) > (now + MAX_FUTURE).timestamp():
        raise _sample_error(samples, now)

    columns: dict[str, list[Any]] = {}
    # The fields no sample carries are all None (checked in C: most batches fill about half).
    for name, (integer, lowest, highest) in SAMPLE_FIELDS.items():
        if name not in carried:
            columns[name] = [None] * len(samples)
            continue
        column = given.get(name) or [sample.get(name) for sample in samples]
        types = set(map(type, column))
        if not types <= (_INT_TYPES if integer else _NUMBER_TYPES):
            raise _sample_error(samples, now)
        if _NONE in types:
            present = [v for v in column if v is not None]
            if present and (min(present) < lowest or max(present) > highest):
                raise _sample_error(samples, now)
        elif min(column) < lowest or max(column) > highest:
            raise _sample_error(samples, now)
        columns[name] = column
    return gpus, epochs, columns


def telemetry_batch_parse(payload: object, *, now: datetime | None = None) -> TelemetryBatch:
    """Validate a decoded telemetry payload (docs/api-contract.md); raise ``IngestRejected``."""
    now = now or datetime.now(UTC)
    body = _object(payload, path="", keys=BATCH_KEYS)
    batch_id = _string(body.get("batch_id"), path="batch_id", max_length=128, required=True)
    if "host" not in body:
        raise IngestRejected("is required", path="host", code="missing")
    hostname, facts = _host_parse(body["host"])
    accelerators = _accelerators_parse(body.get("accelerators"))
    gpus, epochs, columns = _samples_parse(body.get("samples"), now)
    return TelemetryBatch(
        batch_id=batch_id,
        hostname=hostname,
        host_facts=facts,
        accelerators=accelerators,
        gpus=gpus,
        epochs=epochs,
        columns=columns,
        samples=body.get("samples") or [],
    )
