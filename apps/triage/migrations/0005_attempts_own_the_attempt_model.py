"""Triage's foreign keys to the attempt now point at attempts.Attempt (state only).

Same table (campaigns_attempt), same columns, same constraints: the database is not touched (see attempts 0001).
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("attempts", "0001_initial"),
        ("triage", "0004_merge_suspects_and_validations"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="attemptreview",
                    name="attempt",
                    field=models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="review",
                        to="attempts.attempt",
                    ),
                ),
                migrations.AlterField(
                    model_name="auditentry",
                    name="attempt",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="audit_entries",
                        to="attempts.attempt",
                    ),
                ),
                migrations.AlterField(
                    model_name="rubricverdict",
                    name="attempt",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="rubric_verdicts",
                        to="attempts.attempt",
                    ),
                ),
                migrations.AlterField(
                    model_name="taskhealthissue",
                    name="attempt",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="attempts.attempt",
                    ),
                ),
            ],
            database_operations=[],
        ),
    ]
