"""Which gave an allocation line its model: a label rule, a serving-model-name rule or the serving
metrics on its GPUs (docs/attribution.md, "Rules")."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('attribution', '0001_initial'),
    ]

    operations = [
        migrations.AddField(
            model_name='allocationdaily',
            name='model_source',
            field=models.CharField(blank=True, choices=[('label', 'Label rule'), ('model_name', 'Serving model name rule'), ('serving', 'Serving metrics')], max_length=16),
        ),
    ]
