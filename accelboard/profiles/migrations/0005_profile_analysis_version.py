"""``Profile.analysis_version``: profiles stored before are version 1 (their verdicts predate the
evidence-only rules); new ones get the current version."""

from django.db import migrations, models

import accelboard.profiles.models


class Migration(migrations.Migration):
    dependencies = [("profiles", "0004_profile_hta")]

    operations = [
        migrations.AddField(
            model_name="profile",
            name="analysis_version",
            field=models.PositiveSmallIntegerField(default=1),
        ),
        migrations.AlterField(
            model_name="profile",
            name="analysis_version",
            field=models.PositiveSmallIntegerField(
                default=accelboard.profiles.models.analysis_version_current,
                help_text="The verdict rules the verdict and findings were derived by (ANALYSIS_VERSION)",
            ),
        ),
    ]
