"""Attempt, TaskSummary, SignatureCount, SignatureVariant and AttemptSignature move from campaigns to attempts: state only.

The tables (campaigns_attempt, campaigns_tasksummary, campaigns_signaturecount,
campaigns_signaturevariant, campaigns_attemptsignature) were created by campaigns 0001-0010 and stay
exactly as they are — same names (Meta.db_table), rows, ids, indexes, constraints and foreign keys —
so an existing database, with data, migrates forward without any table being copied or rebuilt.
triage 0005 then points its foreign keys at attempts.Attempt and campaigns 0011 drops the old
models from its state. The content types follow the models, so admin history and permissions keep
pointing at them. Precedent: agents 0001 / campaigns 0003.
"""

import django.db.models.deletion
from decimal import Decimal
from django.db import migrations, models


MOVED = ("attempt", "tasksummary", "signaturecount", "signaturevariant", "attemptsignature")


def move_content_types(apps, schema_editor, *, source="campaigns", target="attempts"):
    content_type = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        if not content_type.objects.filter(app_label=target, model=model).exists():
            content_type.objects.filter(app_label=source, model=model).update(app_label=target)


def move_content_types_back(apps, schema_editor):
    move_content_types(apps, schema_editor, source="attempts", target="campaigns")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("campaigns", "0010_attempt_signature_rows"),
        ("suites", "0002_suite_team"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Attempt",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("index", models.PositiveIntegerField()),
                        (
                            "status",
                            models.CharField(
                                choices=[
                                    ("queued", "Queued"),
                                    ("running", "Running"),
                                    ("done", "Done"),
                                    ("infra_error", "Infrastructure error"),
                                    ("cancelled", "Cancelled"),
                                ],
                                default="queued",
                                max_length=20,
                            ),
                        ),
                        ("termination", models.CharField(blank=True, max_length=20)),
                        (
                            "verdict",
                            models.CharField(
                                blank=True,
                                choices=[("pass", "Pass"), ("fail", "Fail"), ("unjudged", "Unjudged")],
                                max_length=10,
                            ),
                        ),
                        ("categories", models.JSONField(blank=True, default=list)),
                        ("clean_looking", models.BooleanField(default=False)),
                        ("task_hash", models.CharField(blank=True, max_length=64)),
                        ("input_tokens", models.BigIntegerField(default=0)),
                        ("cached_input_tokens", models.BigIntegerField(default=0)),
                        ("output_tokens", models.BigIntegerField(default=0)),
                        ("reasoning_tokens", models.BigIntegerField(default=0)),
                        ("eval_tokens", models.BigIntegerField(default=0)),
                        (
                            "agent_cost",
                            models.DecimalField(blank=True, decimal_places=8, max_digits=14, null=True),
                        ),
                        (
                            "eval_cost",
                            models.DecimalField(blank=True, decimal_places=8, max_digits=14, null=True),
                        ),
                        ("tool_calls", models.PositiveIntegerField(default=0)),
                        ("diff_items", models.PositiveIntegerField(default=0)),
                        ("duration_ms", models.FloatField(default=0.0)),
                        (
                            "result",
                            models.JSONField(
                                blank=True,
                                default=dict,
                                help_text="AttemptResult.to_dict(): transcript, diff, checks…",
                            ),
                        ),
                        ("provider", models.JSONField(blank=True, default=list)),
                        ("superseded_runs", models.JSONField(blank=True, default=list)),
                        ("error_detail", models.TextField(blank=True)),
                        ("retries", models.PositiveIntegerField(default=0)),
                        ("worker", models.CharField(blank=True, max_length=200)),
                        ("lease_expires_at", models.DateTimeField(blank=True, null=True)),
                        ("dispatched_at", models.DateTimeField(blank=True, null=True)),
                        ("started_at", models.DateTimeField(blank=True, null=True)),
                        ("finished_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "campaign",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="attempts",
                                to="campaigns.campaign",
                            ),
                        ),
                        (
                            "task",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="attempts",
                                to="suites.task",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "campaigns_attempt",
                        "ordering": ["campaign", "task", "index"],
                    },
                ),
                migrations.CreateModel(
                    name="SignatureVariant",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("digest", models.CharField(max_length=32)),
                        ("items", models.JSONField(default=list)),
                        ("items_hash", models.CharField(max_length=64, unique=True)),
                    ],
                    options={
                        "db_table": "campaigns_signaturevariant",
                    },
                ),
                migrations.CreateModel(
                    name="SignatureCount",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
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
                                db_constraint=False,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="signature_counts",
                                to="campaigns.campaign",
                            ),
                        ),
                        (
                            "task",
                            models.ForeignKey(
                                db_constraint=False,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="signature_counts",
                                to="suites.task",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "campaigns_signaturecount",
                    },
                ),
                migrations.CreateModel(
                    name="TaskSummary",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "n_done",
                            models.PositiveIntegerField(
                                default=0, help_text="Done and judged (unjudged ones are coverage)."
                            ),
                        ),
                        ("n_pass", models.PositiveIntegerField(default=0)),
                        ("n_infra_error", models.PositiveIntegerField(default=0)),
                        ("n_unjudged", models.PositiveIntegerField(default=0)),
                        ("n_cancelled", models.PositiveIntegerField(default=0)),
                        ("n_clean_looking", models.PositiveIntegerField(default=0)),
                        ("input_tokens", models.BigIntegerField(default=0)),
                        ("cached_input_tokens", models.BigIntegerField(default=0)),
                        ("output_tokens", models.BigIntegerField(default=0)),
                        ("reasoning_tokens", models.BigIntegerField(default=0)),
                        ("eval_tokens", models.BigIntegerField(default=0)),
                        (
                            "agent_cost",
                            models.DecimalField(decimal_places=8, default=Decimal("0"), max_digits=16),
                        ),
                        (
                            "eval_cost",
                            models.DecimalField(decimal_places=8, default=Decimal("0"), max_digits=16),
                        ),
                        ("unpriced_attempts", models.PositiveIntegerField(default=0)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        (
                            "campaign",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="summaries",
                                to="campaigns.campaign",
                            ),
                        ),
                        (
                            "task",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="summaries",
                                to="suites.task",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "campaigns_tasksummary",
                    },
                ),
                migrations.CreateModel(
                    name="AttemptSignature",
                    fields=[
                        (
                            "attempt",
                            models.OneToOneField(
                                db_constraint=False,
                                on_delete=django.db.models.deletion.CASCADE,
                                primary_key=True,
                                related_name="failure_signature",
                                serialize=False,
                                to="attempts.attempt",
                            ),
                        ),
                        ("digest", models.CharField(max_length=32)),
                        ("termination", models.CharField(blank=True, max_length=20)),
                        ("clean_looking", models.BooleanField(default=False)),
                        (
                            "campaign",
                            models.ForeignKey(
                                db_constraint=False,
                                db_index=False,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="campaigns.campaign",
                            ),
                        ),
                        (
                            "task",
                            models.ForeignKey(
                                db_constraint=False,
                                db_index=False,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="suites.task",
                            ),
                        ),
                        (
                            "variant",
                            models.ForeignKey(
                                db_constraint=False,
                                db_index=False,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to="attempts.signaturevariant",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "campaigns_attemptsignature",
                    },
                ),
                migrations.AddIndex(
                    model_name="attempt",
                    index=models.Index(fields=["campaign", "status"], name="attempt_campaign_status"),
                ),
                migrations.AddIndex(
                    model_name="attempt",
                    index=models.Index(
                        fields=["campaign", "status", "index", "task"], name="attempt_dispatch_order"
                    ),
                ),
                migrations.AddIndex(
                    model_name="attempt",
                    index=models.Index(fields=["status", "lease_expires_at"], name="attempt_status_lease"),
                ),
                migrations.AddIndex(
                    model_name="attempt",
                    index=models.Index(fields=["campaign", "clean_looking"], name="attempt_campaign_clean"),
                ),
                migrations.AddConstraint(
                    model_name="attempt",
                    constraint=models.UniqueConstraint(
                        fields=("campaign", "task", "index"), name="attempt_unique_triple"
                    ),
                ),
                migrations.AddIndex(
                    model_name="signaturecount",
                    index=models.Index(fields=["signature", "campaign"], name="signature_count_signature"),
                ),
                migrations.AddConstraint(
                    model_name="signaturecount",
                    constraint=models.UniqueConstraint(
                        fields=("campaign", "task", "signature", "termination"), name="signature_count_unique"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="tasksummary",
                    constraint=models.UniqueConstraint(
                        fields=("campaign", "task"), name="summary_unique_pair"
                    ),
                ),
                migrations.AddIndex(
                    model_name="attemptsignature",
                    index=models.Index(fields=["campaign", "task"], name="attempt_signature_pair"),
                ),
                migrations.AddIndex(
                    model_name="attemptsignature",
                    index=models.Index(fields=["digest", "campaign"], name="attempt_signature_digest"),
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(move_content_types, move_content_types_back),
    ]
