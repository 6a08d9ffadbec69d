# IngestBatch moves from api to core, state only: the table (api_ingestbatch) stays as it is.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0001_initial"),
        # The table was created there.
        ("api", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="IngestBatch",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        (
                            "kind",
                            models.CharField(
                                choices=[
                                    ("telemetry", "Telemetry batch"),
                                    ("run", "Benchmark run"),
                                    ("inference", "Inference metrics batch"),
                                ],
                                max_length=16,
                            ),
                        ),
                        ("client_id", models.CharField(max_length=128)),
                        ("result", models.JSONField(default=dict)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "team",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE, related_name="+", to="core.team"
                            ),
                        ),
                    ],
                    options={
                        "db_table": "api_ingestbatch",
                        "ordering": ["-created_at"],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("team", "kind", "client_id"), name="ingestbatch_team_kind_client"
                            )
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
