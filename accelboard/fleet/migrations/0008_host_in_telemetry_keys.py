"""The host in every telemetry and rollup key (docs/scaling.md: ready to distribute by host).

1. Raw samples: primary key (host_id, time, id) instead of (id, time). It also serves one host
   over a time range, so the separate (host_id, time) index goes: one index fewer per COPY row.
2. GPU rollups: unique on (width_s, host, accelerator, bucket) (the host rollups already were);
   the rollups' primary keys become (id, host_id) in the database only (Django still reads
   ``id`` as the key, and its lookups by id keep their index; no column changes).
3. GPU rollups keep 30% of each page free (fillfactor 70): a bucket is upserted again at every
   drain while its minute lasts, and with room on its page the update is HOT (no new entry in
   the table's four indexes; no indexed column changes).
4. Dirty ranges name their host, so a drain recomputes the hosts that sent samples, not the fleet.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('fleet', '0007_accelerator_product_form_factor'),
    ]

    operations = [
        migrations.RunSQL(
            """
            ALTER TABLE fleet_telemetrysample DROP CONSTRAINT fleet_telemetrysample_pkey;
            ALTER TABLE fleet_telemetrysample ADD PRIMARY KEY (host_id, time, id);
            DROP INDEX IF EXISTS fleet_telemetrysample_host_time;
            ALTER TABLE fleet_telemetryrollup DROP CONSTRAINT fleet_telemetryrollup_pkey;
            ALTER TABLE fleet_telemetryrollup ADD PRIMARY KEY (id, host_id);
            ALTER TABLE fleet_hostrollup DROP CONSTRAINT fleet_hostrollup_pkey;
            ALTER TABLE fleet_hostrollup ADD PRIMARY KEY (id, host_id);
            ALTER TABLE fleet_telemetryrollup SET (fillfactor = 70);
            """,
            """
            CREATE INDEX fleet_telemetrysample_host_time ON fleet_telemetrysample (host_id, time);
            ALTER TABLE fleet_telemetrysample DROP CONSTRAINT fleet_telemetrysample_pkey;
            ALTER TABLE fleet_telemetrysample ADD PRIMARY KEY (id, time);
            ALTER TABLE fleet_telemetryrollup DROP CONSTRAINT fleet_telemetryrollup_pkey;
            ALTER TABLE fleet_telemetryrollup ADD PRIMARY KEY (id);
            ALTER TABLE fleet_hostrollup DROP CONSTRAINT fleet_hostrollup_pkey;
            ALTER TABLE fleet_hostrollup ADD PRIMARY KEY (id);
            ALTER TABLE fleet_telemetryrollup RESET (fillfactor);
            """,
        ),
        migrations.RemoveConstraint(
            model_name='telemetryrollup',
            name='rollup_width_gpu_bucket',
        ),
        migrations.AddField(
            model_name='telemetrydirtyrange',
            name='host',
            field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='fleet.host'),
        ),
        migrations.AddConstraint(
            model_name='telemetryrollup',
            constraint=models.UniqueConstraint(fields=('width_s', 'host', 'accelerator', 'bucket'), name='rollup_width_host_gpu_bucket'),
        ),
    ]
