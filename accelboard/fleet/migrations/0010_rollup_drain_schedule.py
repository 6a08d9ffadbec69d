"""The row (id 1, written by its first claim) saying when the next rollup drain is due (``RollupDrainSchedule``): web
processes claim it so the fleet enqueues one drain per interval across all of them."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("fleet", "0009_telemetry_partials"),
    ]

    operations = [
        migrations.CreateModel(
            name="RollupDrainSchedule",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("due", models.DateTimeField()),
            ],
        ),
    ]
