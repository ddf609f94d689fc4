"""Agents belong to a team: an existing agent goes to the one team whose campaigns and drift
watches use it; an agent used by several teams, or by none, stays shared (administrators edit it)."""

from django.db import migrations, models
import django.db.models.deletion


def assign_teams(apps, schema_editor):
    AgentConfig = apps.get_model("agents", "AgentConfig")
    Campaign = apps.get_model("campaigns", "Campaign")
    Watch = apps.get_model("drift", "Watch")
    users: dict[int, set[int]] = {}
    for model in (Campaign, Watch):
        for agent_id, team_id in model.objects.values_list("agent_id", "team_id").distinct():
            users.setdefault(agent_id, set()).add(team_id)
    for agent_id, teams in users.items():
        if len(teams) == 1:
            AgentConfig.objects.filter(pk=agent_id).update(team_id=teams.pop())


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0002_harness_check_agents"),
        ("core", "0002_role_groups"),
        ("campaigns", "0006_unjudged_verdict"),
        ("drift", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="agentconfig",
            name="team",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="agent_configs",
                to="core.team",
            ),
        ),
        migrations.RunPython(assign_teams, migrations.RunPython.noop),
    ]
