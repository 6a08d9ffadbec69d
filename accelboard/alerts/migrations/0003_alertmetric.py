"""One alert per change: the metrics a change alert holds (AlertMetric), and a row for the one
metric of every change alert raised before (its own series, evidence and revert)."""

import django.db.models.deletion
from django.db import migrations, models


def _members_for_existing(apps, schema_editor):
    Alert = apps.get_model("alerts", "Alert")
    AlertMetric = apps.get_model("alerts", "AlertMetric")
    rows = []
    alerts = Alert.objects.filter(kind__in=["regression", "improvement"], series__isnull=False)
    for alert in alerts.iterator():
        detail = alert.detail if isinstance(alert.detail, dict) else {}
        rows.append(
            AlertMetric(
                alert_id=alert.pk,
                series_id=alert.series_id,
                severity=alert.severity,
                before_mean=alert.before_mean,
                before_spread=alert.before_spread,
                after_mean=alert.after_mean,
                after_spread=alert.after_spread,
                pct_change=alert.pct_change,
                confidence=alert.confidence,
                min_effect=alert.min_effect,
                checked_run=detail.get("checked_run"),
                reverted_at_run=detail.get("reverted_at_run"),
            )
        )
    AlertMetric.objects.bulk_create(rows, ignore_conflicts=True)


class Migration(migrations.Migration):
    dependencies = [
        ("alerts", "0002_engine"),
        ("benchmarks", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="AlertMetric",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "severity",
                    models.CharField(
                        choices=[("critical", "Critical"), ("warning", "Warning"), ("info", "Info")],
                        default="warning",
                        max_length=8,
                    ),
                ),
                ("before_mean", models.FloatField(blank=True, null=True)),
                ("before_spread", models.FloatField(blank=True, null=True)),
                ("after_mean", models.FloatField(blank=True, null=True)),
                ("after_spread", models.FloatField(blank=True, null=True)),
                ("pct_change", models.FloatField(blank=True, null=True)),
                ("confidence", models.FloatField(blank=True, null=True)),
                ("min_effect", models.FloatField(blank=True, null=True)),
                ("checked_run", models.BigIntegerField(blank=True, null=True)),
                ("reverted_at_run", models.BigIntegerField(blank=True, null=True)),
                (
                    "alert",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="metrics", to="alerts.alert"
                    ),
                ),
                (
                    "series",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="alert_metrics",
                        to="benchmarks.series",
                    ),
                ),
            ],
            options={
                "ordering": ["alert_id", "id"],
                "constraints": [
                    models.UniqueConstraint(fields=("alert", "series"), name="alert_metric_alert_series")
                ],
            },
        ),
        migrations.RunPython(_members_for_existing, migrations.RunPython.noop),
    ]
