"""Accelerator types carry their model (``product``) and form factor; the catalogue's types get them."""

from django.db import migrations, models


def fill(apps, schema_editor):
    from accelboard.fleet.catalogue_services import accelerator_types_sync

    accelerator_types_sync(apps)


class Migration(migrations.Migration):

    dependencies = [
        ('fleet', '0006_host_project'),
    ]

    operations = [
        migrations.AddField(
            model_name='acceleratortype',
            name='form_factor',
            field=models.CharField(blank=True, choices=[('sxm', 'SXM'), ('pcie', 'PCIe'), ('oam', 'OAM'), ('other', 'Other')], max_length=8),
        ),
        migrations.AddField(
            model_name='acceleratortype',
            name='product',
            field=models.CharField(blank=True, help_text="The vendor's model: H100, MI300X, L40S", max_length=40),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
