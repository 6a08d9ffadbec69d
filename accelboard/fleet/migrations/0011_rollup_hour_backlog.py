"""The row (id 1, written by the first drain) of hour ranges whose hour rollups ingest's drains left for later
(``RollupHourBacklog``), and when the hours were last redone."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("fleet", "0010_rollup_drain_schedule"),
    ]

    operations = [
        migrations.CreateModel(
            name="RollupHourBacklog",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("ranges", models.JSONField(default=list)),
                ("refreshed_at", models.DateTimeField(null=True)),
            ],
        ),
    ]
