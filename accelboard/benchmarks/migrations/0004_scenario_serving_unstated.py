"""The scenarios "serving" and "unstated"; runs stored as Offline only because their file stated no
scenario (``field_sources`` ``workload.scenario`` = ``default``) become "not stated"."""

import hashlib
import json

from django.db import migrations, models


def _identity(workload, scenario):
    # benchmarks.services.WorkloadSpec.identity as of this migration (kept here: it must not change)
    payload = {
        "variant": workload.variant_id,
        "scenario": scenario,
        "batch_size": workload.batch_size,
        "concurrency": workload.concurrency,
        "input_length": workload.input_length,
        "output_length": workload.output_length,
        "framework": workload.framework.lower(),
        "framework_version": workload.framework_version,
        "options": workload.options,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def defaulted_offline_unstated(apps, schema_editor):
    """A workload whose every run got Offline by default (no file said it) is "not stated"; one
    with a run that stated Offline keeps it."""
    Workload = apps.get_model("benchmarks", "Workload")
    BenchmarkRun = apps.get_model("benchmarks", "BenchmarkRun")
    for workload in Workload.objects.filter(scenario="offline").iterator():
        sources = [
            (fields or {}).get("workload.scenario")
            for fields in BenchmarkRun.objects.filter(workload=workload).values_list(
                "field_sources", flat=True
            )
        ]
        if not sources or any(source != "default" for source in sources):
            continue
        identity = _identity(workload, "unstated")
        if Workload.objects.filter(team_id=workload.team_id, identity=identity).exists():
            continue
        Workload.objects.filter(pk=workload.pk).update(scenario="unstated", identity=identity)


class Migration(migrations.Migration):
    dependencies = [
        ("benchmarks", "0003_model_variant_team"),
    ]

    operations = [
        migrations.AlterField(
            model_name="workload",
            name="scenario",
            field=models.CharField(
                choices=[
                    ("offline", "Offline"),
                    ("server", "Server"),
                    ("serving", "Online serving"),
                    ("single-stream", "SingleStream"),
                    ("multi-stream", "MultiStream"),
                    ("interactive", "Interactive"),
                    ("chat", "Chat serving"),
                    ("batch", "Batch"),
                    ("training", "Training"),
                    ("unstated", "Scenario not stated"),
                ],
                default="unstated",
                max_length=16,
            ),
        ),
        migrations.RunPython(defaulted_offline_unstated, migrations.RunPython.noop),
    ]
