"""Models and variants get an owning team (null: shared by every team).

Existing rows used by exactly one team become that team's, so its model names stop being visible
to the others; rows used by several teams (or none) stay shared, as does the reference variant of
a shared model. "Used" means a workload, serving interval, production agreement, serving objective
or serving cost of the team names the variant (or, for a model, any of its variants).
"""

from collections import defaultdict

import django.db.models.deletion
from django.db import migrations, models

# (table, team column, variant column, model column) of every team-owned row naming a variant or model.
_USERS = (
    ("benchmarks_workload", "team_id", "variant_id", None),
    ("serving_inferencemetric", "team_id", "variant_id", None),
    ("drift_productionagreement", "team_id", "variant_id", None),
    ("alerts_servingslo", "team_id", "variant_id", "model_id"),
    ("costs_servingcostdaily", "team_id", "variant_id", None),
)


def owners_assign(apps, schema_editor):
    connection = schema_editor.connection
    tables = set(connection.introspection.table_names())
    variant_teams = defaultdict(set)
    model_teams = defaultdict(set)
    with connection.cursor() as cursor:
        for table, team, variant, model in _USERS:
            if table not in tables:
                continue  # a fresh database: that app is migrated later, with no rows
            cursor.execute(f"SELECT DISTINCT {team}, {variant} FROM {table} WHERE {variant} IS NOT NULL")
            for team_id, variant_id in cursor.fetchall():
                variant_teams[variant_id].add(team_id)
            if model is not None:
                cursor.execute(f"SELECT DISTINCT {team}, {model} FROM {table}")
                for team_id, model_id in cursor.fetchall():
                    model_teams[model_id].add(team_id)
        cursor.execute("SELECT id, model_id FROM benchmarks_modelvariant")
        variants = cursor.fetchall()
        cursor.execute("SELECT id, reference_variant_id FROM benchmarks_model")
        references = dict(cursor.fetchall())
    for variant_id, model_id in variants:
        model_teams[model_id] |= variant_teams[variant_id]
    Model = apps.get_model("benchmarks", "Model")
    ModelVariant = apps.get_model("benchmarks", "ModelVariant")
    for model_id, teams in model_teams.items():
        if len(teams) == 1 and model_id in references:
            (team_id,) = teams
            Model.objects.filter(pk=model_id).update(team_id=team_id)
            ModelVariant.objects.filter(model_id=model_id).update(team_id=team_id)
    shared_references = {
        ref for model_id, ref in references.items() if ref and len(model_teams[model_id]) != 1
    }
    for variant_id, model_id in variants:
        teams = variant_teams[variant_id]
        if len(model_teams[model_id]) != 1 and len(teams) == 1 and variant_id not in shared_references:
            ModelVariant.objects.filter(pk=variant_id).update(team_id=next(iter(teams)))


class Migration(migrations.Migration):
    dependencies = [
        ("benchmarks", "0002_catalogue_identities"),
        ("core", "0001_initial"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="modelvariant",
            name="variant_model_name_unique",
        ),
        migrations.AddField(
            model_name="model",
            name="team",
            field=models.ForeignKey(
                blank=True,
                help_text="Blank: shared by every team; else only this team sees it",
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="models",
                to="core.team",
            ),
        ),
        migrations.AddField(
            model_name="modelvariant",
            name="team",
            field=models.ForeignKey(
                blank=True,
                help_text="Blank: shared by every team; else only this team sees it",
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="model_variants",
                to="core.team",
            ),
        ),
        migrations.AlterField(
            model_name="model",
            name="name",
            field=models.CharField(max_length=120),
        ),
        migrations.AddConstraint(
            model_name="model",
            constraint=models.UniqueConstraint(
                condition=models.Q(("team__isnull", True)), fields=("name",), name="model_shared_name_unique"
            ),
        ),
        migrations.AddConstraint(
            model_name="model",
            constraint=models.UniqueConstraint(fields=("team", "name"), name="model_team_name_unique"),
        ),
        migrations.AddConstraint(
            model_name="modelvariant",
            constraint=models.UniqueConstraint(
                condition=models.Q(("team__isnull", True)),
                fields=("model", "name"),
                name="variant_shared_name_unique",
            ),
        ),
        migrations.AddConstraint(
            model_name="modelvariant",
            constraint=models.UniqueConstraint(
                fields=("model", "team", "name"), name="variant_team_name_unique"
            ),
        ),
        migrations.RunPython(owners_assign, migrations.RunPython.noop),
    ]
