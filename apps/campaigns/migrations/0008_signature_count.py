"""SignatureCount: failed attempts per (campaign, task, signature, termination), filled from stored attempts."""

import django.db.models.deletion
from django.db import migrations, models


def fill(apps, schema_editor):
    # The recount the app ran when this migration was written (signatures then lived on the
    # attempt rows; 0010 moved them), over every stored attempt at once.
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO campaigns_signaturecount (campaign_id, task_id, signature, termination, failures, "
            "clean, first_id, last_id, first_clean_id, last_clean_id) SELECT campaign_id, task_id, signature, "
            "termination, COUNT(*), COUNT(*) FILTER (WHERE clean_looking), MIN(id), MAX(id), "
            "MIN(id) FILTER (WHERE clean_looking), MAX(id) FILTER (WHERE clean_looking) "
            "FROM campaigns_attempt WHERE status = 'done' AND verdict = 'fail' "
            "GROUP BY campaign_id, task_id, signature, termination"
        )


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
