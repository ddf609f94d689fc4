"""The attempt models leave the campaigns app's state (they live in apps.attempts since attempts 0001).

Nothing runs on the database: the tables stay, now owned by the attempts app under their old names.
Runs after triage 0005, so no model in the state still points at campaigns.Attempt.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0010_attempt_signature_rows"),
        ("triage", "0005_attempts_own_the_attempt_model"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name="attemptsignature",
                    name="attempt",
                ),
                migrations.RemoveField(
                    model_name="attemptsignature",
                    name="campaign",
                ),
                migrations.RemoveField(
                    model_name="attemptsignature",
                    name="task",
                ),
                migrations.RemoveField(
                    model_name="attemptsignature",
                    name="variant",
                ),
                migrations.RemoveField(
                    model_name="signaturecount",
                    name="campaign",
                ),
                migrations.RemoveField(
                    model_name="signaturecount",
                    name="task",
                ),
                migrations.RemoveField(
                    model_name="tasksummary",
                    name="campaign",
                ),
                migrations.RemoveField(
                    model_name="tasksummary",
                    name="task",
                ),
                migrations.DeleteModel(
                    name="Attempt",
                ),
                migrations.DeleteModel(
                    name="AttemptSignature",
                ),
                migrations.DeleteModel(
                    name="SignatureVariant",
                ),
                migrations.DeleteModel(
                    name="SignatureCount",
                ),
                migrations.DeleteModel(
                    name="TaskSummary",
                ),
            ],
            database_operations=[],
        ),
    ]
