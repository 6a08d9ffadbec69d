"""Accelerator types, sites, hosts, accelerators (keyed by UUID), raw telemetry and its rollups;
the workloads that held GPUs and their attribution intervals (docs/attribution.md).

Raw telemetry lives in a PostgreSQL table range-partitioned by day (created by migration 0002,
not by Django): the ORM model below is unmanaged and used only for reads in the admin and in
tests. Writes go through COPY (``partition_services.telemetry_copy``); charts read the rollups.
Attribution intervals are kept the same way (migration 0012, ``attribution_services``).
"""

from __future__ import annotations

from django.db import models

from accelboard.core.access import TeamScopedQuerySet

from .choices import AttributionBasis, FormFactor, Provider, RollupWidth, Vendor, WorkloadKind


class AcceleratorType(models.Model):
    """A kind of accelerator as priced and compared: "H100 SXM 80GB", "L4", "MI300X": vendor,
    model (``product``), memory, form factor and board power identify it."""

    name = models.CharField(max_length=80, unique=True)
    slug = models.SlugField(max_length=80, unique=True)
    vendor = models.CharField(max_length=16, choices=Vendor.choices, default=Vendor.NVIDIA)
    product = models.CharField(max_length=40, blank=True, help_text="The vendor's model: H100, MI300X, L40S")
    form_factor = models.CharField(max_length=8, choices=FormFactor.choices, blank=True)
    architecture = models.CharField(max_length=40, blank=True)
    memory_bytes = models.BigIntegerField(null=True, blank=True)
    board_power_w = models.FloatField(null=True, blank=True, help_text="Board power limit (TDP), W")
    # Substrings of the NVML / system-JSON name that identify this type ("H100 80GB HBM3", "H100-SXM").
    match_names = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Site(models.Model):
    """Where hosts run: a data centre (on-prem) or a cloud provider's region."""

    name = models.CharField(max_length=80, unique=True)
    provider = models.CharField(max_length=16, choices=Provider.choices, default=Provider.ON_PREM)
    region = models.CharField(max_length=40, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Host(models.Model):
    """A machine as one team knows it: its name is unique within the team that registers it, not
    across teams, so one team's names neither block nor reveal another's (two teams may each have
    a "gpu-node-01"). A host whose team was deleted keeps its rows with no team: no token writes
    to it and no name resolves to it."""

    hostname = models.CharField(max_length=255)
    team = models.ForeignKey(
        "core.Team", null=True, blank=True, on_delete=models.SET_NULL, related_name="hosts"
    )
    site = models.ForeignKey(Site, null=True, blank=True, on_delete=models.SET_NULL, related_name="hosts")
    provider = models.CharField(max_length=16, choices=Provider.choices, default=Provider.ON_PREM)
    region = models.CharField(max_length=40, blank=True)
    instance_type = models.CharField(max_length=60, blank=True)
    # What the host's spend is booked to in the cost report (free text, e.g. "search-ranking").
    project = models.CharField(max_length=80, blank=True)
    driver_version = models.CharField(max_length=40, blank=True)
    cuda_version = models.CharField(max_length=20, blank=True)
    agent_version = models.CharField(max_length=20, blank=True)
    simulated = models.BooleanField(default=False, help_text="Telemetry comes from a simulated agent")
    facts = models.JSONField(default=dict, blank=True)
    first_seen_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(null=True, blank=True, db_index=True)

    objects = TeamScopedQuerySet.as_manager()

    class Meta:
        ordering = ["hostname", "id"]
        constraints = [models.UniqueConstraint(fields=["team", "hostname"], name="fleet_host_team_hostname")]
        indexes = [models.Index(fields=["hostname"], name="fleet_host_hostname")]

    def __str__(self) -> str:
        return self.hostname


class AcceleratorQuerySet(TeamScopedQuerySet["Accelerator"]):
    team_field = "host__team"

    def physical(self) -> AcceleratorQuerySet:
        """The GPUs themselves, not their MIG instances (registered beside them, with
        ``parent_uuid``, for attribution): what a GPU count or a host's grid shows."""
        return self.filter(parent_uuid="")


class Accelerator(models.Model):
    """One physical GPU (or MIG instance), keyed by its UUID: never by index."""

    uuid = models.CharField(max_length=96, unique=True)
    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="accelerators")
    accelerator_type = models.ForeignKey(
        AcceleratorType, null=True, blank=True, on_delete=models.SET_NULL, related_name="accelerators"
    )
    index = models.PositiveSmallIntegerField(
        default=0, help_text="NVML index at last report (informative only)"
    )
    name = models.CharField(max_length=120, blank=True, help_text="Model name as the driver reports it")
    serial = models.CharField(max_length=64, blank=True)
    memory_bytes = models.BigIntegerField(null=True, blank=True)
    power_limit_w = models.FloatField(null=True, blank=True)
    driver_version = models.CharField(max_length=40, blank=True)
    mig_mode = models.BooleanField(default=False)
    parent_uuid = models.CharField(max_length=96, blank=True, help_text="The physical GPU of a MIG instance")
    compute_slices = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        help_text="A MIG instance's GPU slices (1g.10gb = 1); a GPU's total (7 on A100 and H100)",
    )
    # Signals the agent found unsupported on this GPU ("power_instant", "ecc", ...).
    unsupported = models.JSONField(default=list, blank=True)
    # The newest sample as the agent sent it, for the live host grid (no scan of raw telemetry).
    last_state = models.JSONField(default=dict, blank=True)
    first_seen_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)

    objects = AcceleratorQuerySet.as_manager()

    class Meta:
        ordering = ["host__hostname", "index"]

    def __str__(self) -> str:
        return f"{self.host.hostname}#{self.index} {self.name or self.uuid}"


TELEMETRY_COLUMNS = (
    "time",
    "host_id",
    "accelerator_id",
    "power_w",
    "energy_mj",
    "gpu_util",
    "mem_util",
    "mem_used_bytes",
    "mem_total_bytes",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "temperature_c",
    "throttle_reasons",
    "ecc_errors",
    "xid_errors",
)


class TelemetrySample(models.Model):
    """One NVML reading of one GPU. Partitioned by ``time`` (daily); see migration 0002."""

    id = models.BigIntegerField(primary_key=True)
    time = models.DateTimeField()
    host = models.ForeignKey(Host, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+")
    accelerator = models.ForeignKey(
        Accelerator, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    power_w = models.FloatField(null=True, help_text="W")
    energy_mj = models.BigIntegerField(null=True, help_text="Energy counter, mJ since driver load")
    gpu_util = models.FloatField(null=True, help_text="%")
    mem_util = models.FloatField(null=True, help_text="%")
    mem_used_bytes = models.BigIntegerField(null=True)
    mem_total_bytes = models.BigIntegerField(null=True)
    sm_clock_mhz = models.FloatField(null=True)
    mem_clock_mhz = models.FloatField(null=True)
    temperature_c = models.FloatField(null=True)
    throttle_reasons = models.BigIntegerField(null=True, help_text="NVML clocks-event reason bitmask")
    ecc_errors = models.BigIntegerField(null=True)
    xid_errors = models.IntegerField(null=True)
    # Added by migration 0014 (Prometheus remote-write: dcgm-exporter's series).
    mem_free_bytes = models.BigIntegerField(null=True)
    mem_reserved_bytes = models.BigIntegerField(null=True)
    gr_engine_active = models.FloatField(null=True, help_text="% of time the graphics engine was active")
    sm_active = models.FloatField(null=True, help_text="% of time at least one warp was on an SM")
    sm_occupancy = models.FloatField(null=True, help_text="% of the SMs' warp slots occupied")
    tensor_active = models.FloatField(null=True, help_text="% of cycles the tensor pipe was active")
    dram_active = models.FloatField(null=True, help_text="% of cycles device memory was busy")
    pcie_replay_errors = models.BigIntegerField(null=True, help_text="PCIe replays, a counter")
    remapped_rows_correctable = models.BigIntegerField(null=True)
    remapped_rows_uncorrectable = models.BigIntegerField(null=True)

    class Meta:
        managed = False
        db_table = "fleet_telemetrysample"
        ordering = ["-time"]

    def __str__(self) -> str:
        return f"GPU {self.accelerator_id} at {self.time:%Y-%m-%d %H:%M:%S}"


class TelemetryRollup(models.Model):
    """Per-GPU aggregates over a fixed bucket (1 minute or 1 hour), kept by Celery.

    ``energy_j`` sums the energy counter's non-negative deltas attributed to the bucket of the later
    sample (a counter that went down started a new segment and contributes nothing); where a GPU
    has no counter it falls back to integrating power over the time between samples.
    """

    width_s = models.PositiveIntegerField(choices=RollupWidth.choices)
    bucket = models.DateTimeField()
    # No database foreign keys on the rollup tables (as on the raw table): their deferred checks
    # cost ~20 µs a row at commit, 39 s of a 14-day demo load. Deletes still cascade (Django).
    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    accelerator = models.ForeignKey(
        Accelerator, on_delete=models.CASCADE, related_name="rollups", db_constraint=False
    )
    samples = models.IntegerField()
    # Each average carries the count of non-NULL samples behind it, so that hour rollups built
    # from minute rollups are exact sample-weighted means even where a signal was missing.
    power_samples = models.IntegerField(default=0)
    power_avg_w = models.FloatField(null=True)
    power_max_w = models.FloatField(null=True)
    energy_j = models.FloatField(null=True)
    gpu_util_samples = models.IntegerField(default=0)
    gpu_util_avg = models.FloatField(null=True)
    gpu_util_max = models.FloatField(null=True)
    mem_util_samples = models.IntegerField(default=0)
    mem_util_avg = models.FloatField(null=True)
    mem_used_samples = models.IntegerField(default=0)
    mem_used_avg_bytes = models.FloatField(null=True)
    mem_used_max_bytes = models.BigIntegerField(null=True)
    mem_total_bytes = models.BigIntegerField(null=True)
    temperature_max_c = models.FloatField(null=True)
    sm_clock_samples = models.IntegerField(default=0)
    sm_clock_avg_mhz = models.FloatField(null=True)
    mem_clock_samples = models.IntegerField(default=0)
    mem_clock_avg_mhz = models.FloatField(null=True)
    throttled_samples = models.IntegerField(default=0)
    ecc_errors_max = models.BigIntegerField(null=True)
    xid_errors_max = models.IntegerField(null=True)
    # DCGM profiling counters (``partials.PROFILING_FIELDS``), in %: sample-weighted means.
    # ``db_default``: rows written by statements that predate them (the demo's) count no samples.
    gr_engine_active_samples = models.IntegerField(default=0, db_default=0)
    gr_engine_active_avg = models.FloatField(null=True)
    sm_active_samples = models.IntegerField(default=0, db_default=0)
    sm_active_avg = models.FloatField(null=True)
    sm_occupancy_samples = models.IntegerField(default=0, db_default=0)
    sm_occupancy_avg = models.FloatField(null=True)
    tensor_active_samples = models.IntegerField(default=0, db_default=0)
    tensor_active_avg = models.FloatField(null=True)
    dram_active_samples = models.IntegerField(default=0, db_default=0)
    dram_active_avg = models.FloatField(null=True)

    class Meta:
        # The host is in the key (and in every telemetry and rollup key): the tables can be
        # distributed by host (Citus, docs/scaling.md), and a GPU moved to another host mid-bucket
        # keeps one row per host.
        constraints = [
            models.UniqueConstraint(
                fields=["width_s", "host", "accelerator", "bucket"], name="rollup_width_host_gpu_bucket"
            )
        ]
        indexes = [
            models.Index(fields=["width_s", "bucket"], name="rollup_width_bucket"),
            models.Index(fields=["width_s", "host", "bucket"], name="rollup_width_host_bucket"),
        ]
        ordering = ["-bucket"]

    def __str__(self) -> str:
        return f"GPU {self.accelerator_id} {self.width_s}s bucket {self.bucket:%Y-%m-%d %H:%M}"


class HostRollup(models.Model):
    """Per-host (and accelerator type) aggregates of the GPU rollups of the same bucket.

    Fleet-wide charts over weeks read this table: measured with 128 GPUs in 16 hosts, 30 days of
    hourly fleet utilisation took ~50 ms from the GPU rollups and a few ms from here. A host with
    two kinds of GPU has one row per kind, so charts can still split by accelerator type.
    """

    width_s = models.PositiveIntegerField(choices=RollupWidth.choices)
    bucket = models.DateTimeField()
    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="rollups", db_constraint=False)
    accelerator_type = models.ForeignKey(
        AcceleratorType,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        db_constraint=False,
    )
    gpus = models.IntegerField(help_text="GPUs with at least one sample in the bucket")
    samples = models.IntegerField()
    power_samples = models.IntegerField(default=0)
    power_avg_w = models.FloatField(null=True, help_text="Mean power of one GPU, W (sample-weighted)")
    power_sum_w = models.FloatField(null=True, help_text="Sum of the GPUs' mean power: the host's draw, W")
    power_max_w = models.FloatField(null=True)
    energy_j = models.FloatField(null=True)
    gpu_util_samples = models.IntegerField(default=0)
    gpu_util_avg = models.FloatField(null=True)
    gpu_util_max = models.FloatField(null=True)
    temperature_max_c = models.FloatField(null=True)
    throttled_samples = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["width_s", "host", "accelerator_type", "bucket"],
                name="hostrollup_width_host_type_bucket",
                nulls_distinct=False,
            )
        ]
        indexes = [models.Index(fields=["width_s", "bucket"], name="hostrollup_width_bucket")]
        ordering = ["-bucket"]

    def __str__(self) -> str:
        return f"host {self.host_id} {self.width_s}s bucket {self.bucket:%Y-%m-%d %H:%M}"


class TelemetryDirtyRange(models.Model):
    """A time range of one host (or of every host, ``host`` NULL) whose rollups are stale because
    samples landed in it.

    Ingest appends one row per batch; the rollup drain takes them all at once and recomputes the
    merged range for the hosts named only, so a burst of small batches costs one recompute of
    the hosts that sent them instead of one per batch, or one of the whole fleet.
    """

    start = models.DateTimeField()
    end = models.DateTimeField()
    # No database foreign key nor index: one row per batch, deleted within seconds.
    host = models.ForeignKey(
        Host,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # The rows have no partial aggregates yet (an agent's batch): the drain computes them from the
    # raw rows the mark's own (sub)transaction wrote, its ``xmin`` (``rollup_services``).
    partials_pending = models.BooleanField(default=False, db_default=False)

    class Meta:
        ordering = ["start"]

    def __str__(self) -> str:
        return f"{self.start:%Y-%m-%d %H:%M:%S} .. {self.end:%Y-%m-%d %H:%M:%S}"


class RollupDrainSchedule(models.Model):
    """One row (id 1): when the next rollup drain is due. Web processes claim it with one
    conditional upsert (``rollup_request_services.telemetry_rollups_claim``) so that a fleet's batches, over every web process
    and machine, enqueue one drain per ``ROLLUP_INTERVAL_S`` rather than one per process."""

    due = models.DateTimeField()

    def __str__(self) -> str:
        return f"next rollup drain due {self.due:%Y-%m-%d %H:%M:%S}"


class RollupHourBacklog(models.Model):
    """One row (id 1): the hour ranges whose hour rollups the drains left for later, and when the
    hour rollups were last brought up to date (``rollup_services.telemetry_rollups_drain``). Ingest's
    drains redo the minute rollups every ``ROLLUP_INTERVAL_S`` but the hours at most once per
    ``ROLLUP_HOUR_INTERVAL_S``: an hour row sums all the minute rows of its hour so far, for every
    GPU, and at 2,000 hosts redoing it every 10 s was most of a drain. Only drains write it (under
    the rollups' advisory lock), so it is a row of its own, not the claim row web processes update."""

    ranges = models.JSONField(default=list)  # [[start ISO, end ISO], ...], merged, of bucket times
    refreshed_at = models.DateTimeField(null=True)

    def __str__(self) -> str:
        return f"{len(self.ranges)} hour ranges pending"


class RollupHourBase(models.Model):
    """Per GPU and hour: the minute rollups of the hour before ``upto`` summed, so that the hour
    pass (``rollup_services.telemetry_rollups_hours_refresh``) reads only the minutes from ``upto``
    on instead of every minute of the hour so far (issue 37). Averages are kept as weighted sums
    (``*_wsum``: the sum of each minute's mean times its count), the way the hour's mean is
    computed. Every row of an hour has the same ``upto``; a refresh that rewrites a minute before
    it deletes the hour's rows (the next pass reads the whole hour again). Rows of hours older
    than ``rollup_services.HOUR_BASE_KEEP`` are deleted."""

    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    accelerator = models.ForeignKey(
        Accelerator, on_delete=models.CASCADE, related_name="+", db_constraint=False
    )
    bucket = models.DateTimeField()  # the hour
    upto = models.DateTimeField()  # the minutes in [bucket, upto) are summed here
    samples = models.BigIntegerField()
    energy_j = models.FloatField(null=True)
    throttled_samples = models.BigIntegerField()
    power_max_w = models.FloatField(null=True)
    gpu_util_max = models.FloatField(null=True)
    mem_used_max_bytes = models.BigIntegerField(null=True)
    mem_total_bytes = models.BigIntegerField(null=True)
    temperature_max_c = models.FloatField(null=True)
    ecc_errors_max = models.BigIntegerField(null=True)
    xid_errors_max = models.IntegerField(null=True)
    power_samples = models.BigIntegerField()
    power_wsum = models.FloatField(null=True)
    gpu_util_samples = models.BigIntegerField()
    gpu_util_wsum = models.FloatField(null=True)
    mem_util_samples = models.BigIntegerField()
    mem_util_wsum = models.FloatField(null=True)
    mem_used_samples = models.BigIntegerField()
    mem_used_wsum = models.FloatField(null=True)
    sm_clock_samples = models.BigIntegerField()
    sm_clock_wsum = models.FloatField(null=True)
    mem_clock_samples = models.BigIntegerField()
    mem_clock_wsum = models.FloatField(null=True)
    gr_engine_active_samples = models.BigIntegerField()
    gr_engine_active_wsum = models.FloatField(null=True)
    sm_active_samples = models.BigIntegerField()
    sm_active_wsum = models.FloatField(null=True)
    sm_occupancy_samples = models.BigIntegerField()
    sm_occupancy_wsum = models.FloatField(null=True)
    tensor_active_samples = models.BigIntegerField()
    tensor_active_wsum = models.FloatField(null=True)
    dram_active_samples = models.BigIntegerField()
    dram_active_wsum = models.FloatField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["host", "accelerator", "bucket"], name="rollup_hour_base_key")
        ]
        # A refresh's check (rows of its hours with ``upto`` past its first minute) reads only this.
        indexes = [models.Index(fields=["bucket", "upto"], name="rollup_hour_base_bucket_upto")]

    def __str__(self) -> str:
        return f"GPU {self.accelerator_id} hour {self.bucket:%Y-%m-%d %H:%M} up to {self.upto:%H:%M}"


class PrometheusUnknownMetric(models.Model):
    """Samples of a metric that Prometheus remote-wrote and accelboard does not map, by name
    (``remote_write_services``): shown by the pipeline status so an operator sees what a
    ``write_relabel_configs`` could drop, or a dcgm-exporter version whose names changed. At most
    ``UNKNOWN_METRICS_KEPT`` names are kept; the counts of those go on."""

    name = models.CharField(max_length=200, unique=True)
    samples = models.BigIntegerField(default=0)
    last_seen_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name}: {self.samples} samples"


class TelemetryRawRange(models.Model):
    """A time range (of every host) holding raw samples with no partial aggregates: written by
    anything that copies raw rows but telemetry ingest (a backfill, the demo loader). A rollup
    refresh within reach of one reads raw rows (fleet/partials.py). Deleted with retention."""

    start = models.DateTimeField()
    end = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["start"]

    def __str__(self) -> str:
        return f"raw {self.start:%Y-%m-%d %H:%M:%S} .. {self.end:%Y-%m-%d %H:%M:%S}"


class WorkloadQuerySet(TeamScopedQuerySet["Workload"]):
    team_field = "team"


class Workload(models.Model):
    """What held a GPU (docs/attribution.md): a pod, a Slurm job or a process, as the agent of a
    host of ``team`` named it. One row per (team, kind, uid); written by
    ``attribution_services`` (one upsert per batch), its fields the latest the agent sent."""

    team = models.ForeignKey("core.Team", on_delete=models.CASCADE, related_name="gpu_workloads")
    kind = models.CharField(max_length=16, choices=WorkloadKind.choices)
    # Pod UID, Slurm job id, or "<pid>@<start time>" for a process.
    uid = models.CharField(max_length=320)  # a named pod: "<namespace>/<name>", 63 + 1 + 253
    namespace = models.CharField(max_length=253, blank=True)
    name = models.CharField(max_length=253, blank=True)
    container = models.CharField(max_length=253, blank=True)
    labels = models.JSONField(default=dict, blank=True)
    user = models.CharField(max_length=253, blank=True)
    account = models.CharField(max_length=253, blank=True)
    partition = models.CharField(max_length=253, blank=True)
    first_seen_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()

    objects = WorkloadQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "kind", "uid"], name="workload_team_kind_uid")]
        ordering = ["kind", "namespace", "name"]

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name or self.uid}"


ATTRIBUTION_COLUMNS = (
    "start",
    "end",
    "host_id",
    "accelerator_id",
    "workload_id",
    "share",
    "basis",
    "memory_bytes",
    "sm_util",
)


class GpuAttribution(models.Model):
    """One workload's hold on one GPU or MIG instance over [start, end): its share of the device,
    how the share was found, and what it used when measured. Partitioned by ``start`` (daily,
    dropped with telemetry's); an interval crossing midnight UTC is stored as one row per day
    (migration 0012). Written by COPY (``attribution_services``); this model only reads."""

    id = models.BigIntegerField(primary_key=True)
    start = models.DateTimeField()
    end = models.DateTimeField()
    host = models.ForeignKey(Host, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+")
    accelerator = models.ForeignKey(
        Accelerator, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    workload = models.ForeignKey(Workload, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+")
    share = models.FloatField(help_text="The fraction of the device held, 0 < share <= 1")
    basis = models.CharField(max_length=16, choices=AttributionBasis.choices)
    memory_bytes = models.BigIntegerField(null=True)
    sm_util = models.FloatField(null=True, help_text="%")

    class Meta:
        managed = False
        db_table = "fleet_gpuattribution"
        ordering = ["start"]

    def __str__(self) -> str:
        return f"GPU {self.accelerator_id} held by workload {self.workload_id} from {self.start:%Y-%m-%d %H:%M:%S}"
