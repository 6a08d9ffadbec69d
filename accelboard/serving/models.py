"""Serving metrics per interval. Latencies in ms; token and request counts are per interval."""

from __future__ import annotations

from django.db import models

from accelboard.core.access import TeamScopedQuerySet

from .choices import Engine


class InferenceMetric(models.Model):
    team = models.ForeignKey("core.Team", on_delete=models.CASCADE, related_name="inference_metrics")
    host = models.ForeignKey("fleet.Host", on_delete=models.CASCADE, related_name="inference_metrics")
    variant = models.ForeignKey(
        "benchmarks.ModelVariant", on_delete=models.PROTECT, related_name="inference_metrics"
    )
    engine = models.CharField(max_length=16, choices=Engine.choices, default=Engine.VLLM)
    # The GPUs serving this model on the host, by UUID, to join with their energy.
    accelerator_uuids = models.JSONField(default=list, blank=True)
    # The deployment's workload labels ({"track": "canary"}), as the exporter sent them: what a
    # canary comparison selects deployments by. Two deployments of one variant on one host share
    # an interval's key, so a canary of the same variant runs on its own hosts.
    labels = models.JSONField(default=dict, blank=True)
    interval_start = models.DateTimeField()
    interval_s = models.PositiveIntegerField()
    requests = models.BigIntegerField(default=0)
    errors = models.BigIntegerField(default=0)
    prompt_tokens = models.BigIntegerField(default=0)
    generated_tokens = models.BigIntegerField(default=0)
    ttft_p50_ms = models.FloatField(null=True, blank=True)
    ttft_p99_ms = models.FloatField(null=True, blank=True)
    itl_p50_ms = models.FloatField(null=True, blank=True)
    itl_p99_ms = models.FloatField(null=True, blank=True)
    e2e_p50_ms = models.FloatField(null=True, blank=True)
    e2e_p99_ms = models.FloatField(null=True, blank=True)
    queue_p50_ms = models.FloatField(null=True, blank=True)
    queue_p99_ms = models.FloatField(null=True, blank=True)
    # Prometheus-style cumulative buckets per histogram: {"ttft": [[le_seconds, count], ...]}
    histograms = models.JSONField(default=dict, blank=True)
    # Latency sums and their counts per interval, {"e2e_seconds": [sum_s, count], ...} (their mean:
    # sum / count), and Triton's "inferences" and "executions"; filled by Prometheus remote-write.
    latency_sums = models.JSONField(default=dict, blank=True)
    batch_id = models.CharField(max_length=64, blank=True, help_text="Client id of the request that sent it")

    objects = TeamScopedQuerySet.as_manager()

    class Meta:
        ordering = ["-interval_start"]
        constraints = [
            models.UniqueConstraint(
                fields=["host", "variant", "interval_start"], name="inference_host_variant_start"
            )
        ]
        indexes = [models.Index(fields=["team", "interval_start"], name="inference_team_start")]

    def __str__(self) -> str:
        return f"{self.variant} on {self.host} at {self.interval_start:%Y-%m-%d %H:%M}"


class PrometheusSeriesState(models.Model):
    """The last sample of a vLLM or Triton counter received by Prometheus remote-write, per team
    and series (``key``: the metric and its sorted labels, hashed): the next sample's delta is
    taken from it (``serving.remote_write``)."""

    team = models.ForeignKey("core.Team", on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=32)
    metric = models.CharField(max_length=200)
    last_ms = models.BigIntegerField(help_text="The sample's Prometheus timestamp, ms since the epoch")
    value = models.FloatField()

    objects = TeamScopedQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "key"], name="prometheus_series_state_team_key")
        ]

    def __str__(self) -> str:
        return f"{self.metric} at {self.last_ms}"
