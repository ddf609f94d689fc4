"""AgentConfig and PriceSheet move from the campaigns app to this one: Django's state only.

The tables (campaigns_agentconfig, campaigns_pricesheet) were created by campaigns 0001 and stay
exactly as they are — same names (Meta.db_table), rows, ids and foreign keys — so an existing
database, with data, migrates forward without any table being copied or rebuilt. campaigns 0003
then points Campaign's foreign keys at these models and drops the old ones from its state.
The content types follow the models, so admin history and permissions keep pointing at them.
"""

from django.db import migrations, models

MOVED = ("agentconfig", "pricesheet")


def move_content_types(apps, schema_editor, *, source="campaigns", target="agents"):
    content_type = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        if not content_type.objects.filter(app_label=target, model=model).exists():
            content_type.objects.filter(app_label=source, model=model).update(app_label=target)


def move_content_types_back(apps, schema_editor):
    move_content_types(apps, schema_editor, source="agents", target="campaigns")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("campaigns", "0002_dispatch_order_index"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="AgentConfig",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("name", models.CharField(max_length=200, unique=True)),
                        ("kind", models.CharField(choices=[("golden", "Golden replay (harness self-check)"), ("sim", "Simulated persona (not a model)"), ("openai", "OpenAI-compatible endpoint")], max_length=20)),
                        ("persona", models.CharField(blank=True, help_text="For simulated agents.", max_length=50)),
                        ("model", models.CharField(blank=True, max_length=200)),
                        ("base_url", models.URLField(blank=True, max_length=500)),
                        ("api_key_env", models.CharField(blank=True, help_text="Name of the environment variable holding the key (never the key).", max_length=100)),
                        ("parameters", models.JSONField(blank=True, default=dict, help_text="temperature, max_tokens, reasoning, headers…")),
                        ("max_concurrency", models.PositiveIntegerField(default=16, help_text="Concurrent attempts per endpoint.")),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        "db_table": "campaigns_agentconfig",
                        "ordering": ["name"],
                    },
                ),
                migrations.CreateModel(
                    name="PriceSheet",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("name", models.CharField(max_length=200, unique=True)),
                        ("source", models.CharField(max_length=500)),
                        ("effective_date", models.DateField()),
                        ("prices", models.JSONField(default=dict)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        "db_table": "campaigns_pricesheet",
                        "ordering": ["-effective_date", "name"],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(move_content_types, move_content_types_back),
    ]
