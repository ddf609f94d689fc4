from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("figures", "0001_stored_figures"),
    ]

    operations = [
        migrations.CreateModel(
            name="FigureRefresh",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("campaign_id", models.BigIntegerField(unique=True)),
                ("claimed_at", models.DateTimeField(blank=True, null=True)),
                ("refreshed_at", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "db_table": "figures_figurerefresh",
            },
        ),
    ]
