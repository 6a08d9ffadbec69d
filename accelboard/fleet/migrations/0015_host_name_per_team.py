"""Host names unique per team, not across teams (issue 34, finding 4).

1. ``fleet_host.hostname`` loses its global unique index (a plain index stays for the lookups by
   name alone: the finance filter, the admin's search); ``(team, hostname)`` is unique instead.
   Every existing row satisfies it (names were unique across all teams).
2. Serving rows stored against a host that is not their team's (a serving batch that named another
   team's host, or a host registered without a team that another team's agent later claimed) move
   to their own team's host of that name, created when the team has none, or given to that team
   when the host has no team and only that team's rows. Their ``ServingCostDaily`` rows, worked
   out with the other host's PUE and prices, are deleted: ``manage.py costs recompute`` for those
   days writes them again against the team's own host.
"""

from django.db import migrations, models


def _serving_rows_home(apps, schema_editor):
    Host = apps.get_model("fleet", "Host")
    InferenceMetric = apps.get_model("serving", "InferenceMetric")
    ServingCostDaily = apps.get_model("costs", "ServingCostDaily")
    misplaced = (
        InferenceMetric.objects.exclude(host__team_id=models.F("team_id"))
        .values_list("host_id", "team_id")
        .distinct()
        .order_by("host_id", "team_id")
    )
    by_host: dict[int, list[int]] = {}
    for host_id, team_id in misplaced:
        by_host.setdefault(host_id, []).append(team_id)
    for host_id, team_ids in by_host.items():
        host = Host.objects.get(pk=host_id)
        for team_id in team_ids:
            if (
                host.team_id is None
                and len(team_ids) == 1
                and not InferenceMetric.objects.filter(host_id=host_id).exclude(team_id=team_id).exists()
                and not Host.objects.filter(team_id=team_id, hostname=host.hostname).exists()
            ):
                host.team_id = team_id
                host.save(update_fields=["team_id"])
            else:
                own, _ = Host.objects.get_or_create(team_id=team_id, hostname=host.hostname)
                InferenceMetric.objects.filter(host_id=host_id, team_id=team_id).update(host_id=own.pk)
    ServingCostDaily.objects.exclude(host__team_id=models.F("team_id")).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("fleet", "0014_telemetry_profiling"),
        ("core", "0002_ingestbatch"),
        ("serving", "0002_prometheus_series_state"),
        ("costs", "0003_costdaily_samples"),
    ]

    operations = [
        migrations.AlterModelOptions(name="host", options={"ordering": ["hostname", "id"]}),
        migrations.AlterField(model_name="host", name="hostname", field=models.CharField(max_length=255)),
        migrations.AddIndex(model_name="host", index=models.Index(fields=["hostname"], name="fleet_host_hostname")),
        migrations.AddConstraint(
            model_name="host",
            constraint=models.UniqueConstraint(fields=["team", "hostname"], name="fleet_host_team_hostname"),
        ),
        migrations.RunPython(_serving_rows_home, migrations.RunPython.noop, elidable=True),
    ]
