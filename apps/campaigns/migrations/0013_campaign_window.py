from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def keep_existing_windows(apps, schema_editor):
    """A campaign made before this migration keeps the window it had: its agent's max_concurrency."""
    Campaign = apps.get_model("campaigns", "Campaign")
    AgentConfig = apps.get_model("agents", "AgentConfig")
    Campaign.objects.update(
        window=Subquery(AgentConfig.objects.filter(pk=OuterRef("agent_id")).values("max_concurrency")[:1])
    )


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0004_max_concurrency_caps_the_endpoint"),
        ("campaigns", "0012_campaign_exclude_non_discriminating"),
    ]

    operations = [
        migrations.AddField(
            model_name="campaign",
            name="window",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="Attempts queued or running at once (empty: TB_CAMPAIGN_DEFAULT_WINDOW), "
                "never above TB_CAMPAIGN_MAX_WINDOW.",
                null=True,
            ),
        ),
        migrations.RunPython(keep_existing_windows, migrations.RunPython.noop),
    ]
