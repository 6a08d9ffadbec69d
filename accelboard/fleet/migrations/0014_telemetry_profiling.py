"""DCGM profiling counters, the framebuffer's parts, PCIe replays and remapped rows.

1. Raw table (``fleet_telemetrysample``, partitioned: columns added to the parent are added to
   every partition): nullable ``mem_free_bytes``, ``mem_reserved_bytes`` (dcgm-exporter's
   framebuffer parts, so a total whose parts arrive in different remote-write requests is
   computed when the last part lands), the profiling counters in % (``gr_engine_active``,
   ``sm_active``, ``sm_occupancy``, ``tensor_active``, ``dram_active``), ``pcie_replay_errors``,
   ``remapped_rows_correctable`` and ``remapped_rows_uncorrectable``. Nullable without a default:
   a catalogue change only, whatever the table's size.
2. Partials (``fleet_telemetrypartial``, partitioned too): each profiling counter's count and sum
   (``NOT NULL DEFAULT 0``: a constant default is not written into the existing rows).
3. GPU rollups: each profiling counter's count of samples and mean.
"""

from django.db import migrations, models

PROFILING = ("gr_engine_active", "sm_active", "sm_occupancy", "tensor_active", "dram_active")
RAW = [
    ("mem_free_bytes", "bigint"),
    ("mem_reserved_bytes", "bigint"),
    *((name, "real") for name in PROFILING),
    ("pcie_replay_errors", "bigint"),
    ("remapped_rows_correctable", "bigint"),
    ("remapped_rows_uncorrectable", "bigint"),
]
ADD_RAW = "ALTER TABLE fleet_telemetrysample " + ", ".join(f"ADD COLUMN {name} {kind}" for name, kind in RAW)
DROP_RAW = "ALTER TABLE fleet_telemetrysample " + ", ".join(f"DROP COLUMN {name}" for name, _ in RAW)
ADD_PARTIALS = "ALTER TABLE fleet_telemetrypartial " + ", ".join(
    f"ADD COLUMN {name}_samples integer NOT NULL DEFAULT 0, ADD COLUMN {name}_sum double precision NOT NULL DEFAULT 0"
    for name in PROFILING
)
DROP_PARTIALS = "ALTER TABLE fleet_telemetrypartial " + ", ".join(
    f"DROP COLUMN {name}_samples, DROP COLUMN {name}_sum" for name in PROFILING
)


class Migration(migrations.Migration):
    dependencies = [("fleet", "0013_prometheus_unknown_metric")]

    operations = [
        migrations.RunSQL(ADD_RAW, DROP_RAW),
        migrations.RunSQL(ADD_PARTIALS, DROP_PARTIALS),
        *(
            operation
            for name in PROFILING
            for operation in (
                migrations.AddField(
                    model_name="telemetryrollup",
                    name=f"{name}_samples",
                    field=models.IntegerField(db_default=0, default=0),
                ),
                migrations.AddField(
                    model_name="telemetryrollup", name=f"{name}_avg", field=models.FloatField(null=True)
                ),
            )
        ),
    ]
