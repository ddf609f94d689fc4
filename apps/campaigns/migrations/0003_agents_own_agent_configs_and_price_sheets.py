"""Campaign's foreign keys now point at agents.AgentConfig / agents.PriceSheet (state only).

Same tables, same columns, same constraints: the database is not touched (see agents 0001).
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("campaigns", "0002_dispatch_order_index"),
        ("agents", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="campaign",
                    name="agent",
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="campaigns", to="agents.agentconfig"),
                ),
                migrations.AlterField(
                    model_name="campaign",
                    name="price_sheet",
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, to="agents.pricesheet"),
                ),
                migrations.DeleteModel(name="AgentConfig"),
                migrations.DeleteModel(name="PriceSheet"),
            ],
            database_operations=[],
        ),
    ]
