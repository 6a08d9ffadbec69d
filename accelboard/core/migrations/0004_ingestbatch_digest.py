# The digest of an idempotent write's body, kept with its claim: the same client id with another
# body is refused (409). Claims stored before have none and answer any body, as they did.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0003_membership_source_externalidentity"),
    ]

    operations = [
        migrations.AddField(
            model_name="ingestbatch",
            name="digest",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
    ]
