"""Profile.hta: the HTA-style analyses (``profiles.hta``) stored with the profile as one JSON value."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("profiles", "0003_nsys_sqlite_format")]

    operations = [
        migrations.AddField(
            model_name="profile",
            name="hta",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="HTA-style analyses: idle by stream, launches, steps, ranks (hta.py)",
            ),
        ),
    ]
