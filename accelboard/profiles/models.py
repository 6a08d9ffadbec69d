"""A run's profile, stored as aggregates: per rank, per step and category, and per kernel.

Never every event: a trace of several hundred MB becomes a few hundred rows. ``Profile`` keeps the
summary figures and the verdict; ``ProfileBreakdown`` the exclusive time of each category (idle
included) per rank and per step (``step`` NULL: the whole rank), which add up to the span of
that rank's or step's GPU timeline; ``ProfileKernel`` each GPU activity name summed over ranks.

A profile belongs to its run's team: ``Profile.objects.visible_to(scope)`` (``core.access``); the
per-rank, per-step and per-kernel rows are read through a profile already found that way.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from accelboard.core.access import TeamScopedQuerySet

from .choices import ProfileFormat, Verdict

# The rules a stored verdict and its findings were derived by: 1, before verdicts said only what
# their numbers show (an nsys stats report called "Compute-bound", many kernels called
# launch-bound whatever their idle gaps); 2, the evidence-only rules of ``verdict.py``. Raise it when
# those rules change; ``manage.py profiles_reanalyse`` re-derives the profiles stored before.
ANALYSIS_VERSION = 2


def analysis_version_current() -> int:
    return ANALYSIS_VERSION


def _raw_path(instance: Profile, filename: str) -> str:
    return f"profiles/{instance.run.uuid}/{filename}"


class ProfileQuerySet(TeamScopedQuerySet["Profile"]):
    team_field = "run__team"


class Profile(models.Model):
    run = models.OneToOneField("benchmarks.BenchmarkRun", on_delete=models.CASCADE, related_name="profile")
    source_format = models.CharField(max_length=16, choices=ProfileFormat.choices)
    files = models.JSONField(default=list, help_text="Names of the files the profile was read from")
    ranks = models.PositiveIntegerField(default=1)
    steps = models.PositiveIntegerField(default=0, help_text="Profiler steps (the most of any rank)")
    timeline = models.BooleanField(default=True, help_text="False for summed reports: idle unknown")
    devices = models.JSONField(default=list, blank=True)
    span_us = models.FloatField(null=True, blank=True, help_text="GPU timeline span, summed over ranks")
    busy_us = models.FloatField(default=0.0)
    verdict_kind = models.CharField(max_length=24, choices=Verdict.choices)
    verdict = models.JSONField(default=dict, help_text="Headline, details and the numbers behind them")
    findings = models.JSONField(default=list, blank=True)
    totals = models.JSONField(default=dict, help_text="Totals over ranks: shares, launches, idle kinds")
    precision = models.JSONField(default=dict, blank=True)
    imbalance = models.JSONField(null=True, blank=True)
    ops = models.JSONField(default=list, blank=True, help_text="Top CPU operators by inclusive time")
    warnings = models.JSONField(default=list, blank=True)
    hta = models.JSONField(
        default=dict,
        blank=True,
        help_text="HTA-style analyses: idle by stream, launches, steps, ranks (hta.py)",
    )
    analysis_version = models.PositiveSmallIntegerField(
        default=analysis_version_current,
        help_text="The verdict rules the verdict and findings were derived by (ANALYSIS_VERSION)",
    )
    raw_file = models.FileField(upload_to=_raw_path, blank=True)
    raw_filename = models.CharField(max_length=255, blank=True)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ProfileQuerySet.as_manager()

    def __str__(self) -> str:
        return f"profile of run {self.run_id} ({self.source_format}, {self.ranks} rank(s))"


class ProfileRank(models.Model):
    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="rank_rows")
    rank = models.IntegerField()
    device = models.CharField(max_length=120, blank=True)
    file = models.CharField(max_length=255, blank=True)
    span_us = models.FloatField(null=True, blank=True)
    busy_us = models.FloatField(default=0.0)
    communication_us = models.FloatField(null=True, blank=True)
    overlap_us = models.FloatField(null=True, blank=True)
    idle_host_us = models.FloatField(null=True, blank=True)
    idle_other_us = models.FloatField(null=True, blank=True)
    idle_unknown_us = models.FloatField(null=True, blank=True)
    kernels = models.BigIntegerField(default=0)
    short_kernels = models.BigIntegerField(null=True, blank=True)
    launch_us_mean = models.FloatField(null=True, blank=True)
    streams = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["profile_id", "rank"]
        constraints = [models.UniqueConstraint(fields=["profile", "rank"], name="profile_rank_unique")]

    def __str__(self) -> str:
        return f"rank {self.rank} of profile {self.profile_id}"


class ProfileBreakdown(models.Model):
    """Exclusive time of one category on one rank, over the whole profile or one step."""

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="breakdown")
    rank = models.IntegerField()
    step = models.IntegerField(null=True, blank=True, help_text="NULL: the whole rank")
    category = models.CharField(max_length=20)
    time_us = models.FloatField()

    class Meta:
        ordering = ["profile_id", "rank", "step", "category"]
        constraints = [
            models.UniqueConstraint(
                fields=["profile", "rank", "step", "category"],
                name="profile_breakdown_unique",
                nulls_distinct=False,
            )
        ]

    def __str__(self) -> str:
        return f"{self.category} {self.time_us:.1f} µs (rank {self.rank}, step {self.step})"


class ProfileKernel(models.Model):
    """One GPU activity name (kernel, copy, memset) summed over the profile's ranks."""

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="kernels")
    name = models.TextField()
    kind = models.CharField(max_length=8)
    category = models.CharField(max_length=20)
    precision = models.CharField(max_length=8, blank=True)
    count = models.BigIntegerField()
    total_us = models.FloatField()
    min_us = models.FloatField(null=True, blank=True)
    max_us = models.FloatField(null=True, blank=True)
    ranks = models.PositiveIntegerField(default=1)

    class Meta:
        ordering = ["profile_id", "-total_us"]
        indexes = [models.Index(fields=["profile", "-total_us"], name="profile_kernel_top")]

    def __str__(self) -> str:
        return f"{self.name[:60]} × {self.count}"

    @property
    def mean_us(self) -> float:
        return self.total_us / self.count if self.count else 0.0
