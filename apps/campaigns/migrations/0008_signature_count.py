"""SignatureCount: failed attempts per (campaign, task, signature, termination), filled from stored attempts."""

import django.db.models.deletion
from django.db import migrations, models


def fill(apps, schema_editor):
    # The same recount the app runs (apps.campaigns.summaries), over every stored attempt at once.
    from apps.campaigns.summaries import signature_counts_sql

    with schema_editor.connection.cursor() as cursor:
        for sql in signature_counts_sql("1 = 1"):
            cursor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0007_merge_signatures_and_unjudged"),
        ("suites", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="SignatureCount",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("signature", models.CharField(blank=True, max_length=32)),
                ("termination", models.CharField(blank=True, max_length=20)),
                ("failures", models.PositiveIntegerField(default=0)),
                ("clean", models.PositiveIntegerField(default=0)),
                ("first_id", models.BigIntegerField()),
                ("last_id", models.BigIntegerField()),
                ("first_clean_id", models.BigIntegerField(null=True)),
                ("last_clean_id", models.BigIntegerField(null=True)),
                (
                    "campaign",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="signature_counts",
                        to="campaigns.campaign",
                    ),
                ),
                (
                    "task",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="signature_counts",
                        to="suites.task",
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["signature", "campaign"], name="signature_count_signature")],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("campaign", "task", "signature", "termination"), name="signature_count_unique"
                    )
                ],
            },
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
