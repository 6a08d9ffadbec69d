"""GPU rollups keep half of each page free (fillfactor 50, was 70 since 0008; issue 37).

A drain rewrites every GPU's current minute row (about six times a minute) and, once a minute,
every GPU's current hour row. An update is HOT (no new entry in the table's six indexes) only when
the new version fits on the old one's page. At 70 a page filled by a minute's inserts has room for
the new versions of about 45 % of its rows, so the rest of each drain's updates moved to other
pages and added an entry to every index; at 50 each page holds a second version of all its rows,
and the drain's next visit prunes the first ones. No indexed column changes in these updates.
The table is not partitioned; the setting applies to pages filled from now on (docs/scaling.md).
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("fleet", "0016_dirty_range_partials_pending"),
    ]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE fleet_telemetryrollup SET (fillfactor = 50)",
            "ALTER TABLE fleet_telemetryrollup SET (fillfactor = 70)",
        ),
    ]
