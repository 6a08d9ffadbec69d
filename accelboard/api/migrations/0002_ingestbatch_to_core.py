# IngestBatch moves to core (core 0002), state only: the table is core's now, under its old name.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("api", "0001_initial"),
        ("core", "0002_ingestbatch"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="IngestBatch")],
            database_operations=[],
        ),
    ]
