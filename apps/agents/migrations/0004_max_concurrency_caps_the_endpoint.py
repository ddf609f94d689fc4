from django.db import migrations, models


class Migration(migrations.Migration):
    """max_concurrency no longer sets a campaign's window (Campaign.window does): it caps the
    agent's endpoint across all workers, so its default is as wide as the default window."""

    dependencies = [
        ("agents", "0003_agentconfig_team"),
    ]

    operations = [
        migrations.AlterField(
            model_name="agentconfig",
            name="max_concurrency",
            field=models.PositiveIntegerField(
                default=256, help_text="Requests in flight to this agent's endpoint at once, across all workers."
            ),
        ),
    ]
