# As core 0003: the digest of a drift batch's items, kept with its claim.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("drift", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="agreementbatch",
            name="digest",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
    ]
