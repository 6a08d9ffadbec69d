"""Seed the default accelerator catalogue, so a fresh server recognises the GPUs agents report
(H100, H200, A100, L4, L40S, MI300X) and runs naming them. Safe to re-run: upsert by slug."""

from django.db import migrations


def seed(apps, schema_editor):
    from accelboard.fleet.catalogue_services import accelerator_types_sync

    accelerator_types_sync(apps)


class Migration(migrations.Migration):
    dependencies = [("fleet", "0003_rollup_counts_host_rollup_dirty_ranges")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
