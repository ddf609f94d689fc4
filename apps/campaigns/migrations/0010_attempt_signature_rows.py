"""Failure signatures move out of the attempt row into AttemptSignature (+ shared SignatureVariant).

A backfill then writes narrow rows instead of a new version of every wide attempt row
(bench/clusters.py). Stored signatures are copied; failed attempts without one stay unsigned
(``manage.py backfill_signatures`` signs them).
"""

import hashlib
import json

import django.db.models.deletion
from django.db import migrations, models

BATCH = 2000


def _items_hash(items) -> str:
    # As apps.campaigns.signature_rows.items_text / items_hash when this migration was written.
    text = json.dumps([list(item) for item in items], separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def copy_signatures(apps, schema_editor):
    Attempt = apps.get_model("campaigns", "Attempt")
    AttemptSignature = apps.get_model("campaigns", "AttemptSignature")
    SignatureVariant = apps.get_model("campaigns", "SignatureVariant")
    variants: dict[str, int] = {}
    signed = (
        Attempt.objects.filter(status="done", verdict="fail")
        .exclude(signature="")
        .order_by("pk")
        .values_list("pk", "campaign_id", "task_id", "signature", "signature_items", "termination", "clean_looking")
    )
    batch = []

    def flush():
        for *_, digest, items, _t, _c in batch:
            name = _items_hash(items)
            if name not in variants:
                variants[name] = SignatureVariant.objects.create(digest=digest, items=items, items_hash=name).pk
        AttemptSignature.objects.bulk_create(
            [
                AttemptSignature(
                    attempt_id=pk,
                    campaign_id=campaign_id,
                    task_id=task_id,
                    digest=digest,
                    variant_id=variants[_items_hash(items)],
                    termination=termination,
                    clean_looking=clean,
                )
                for pk, campaign_id, task_id, digest, items, termination, clean in batch
            ]
        )
        batch.clear()

    for row in signed.iterator(chunk_size=BATCH):
        batch.append(row)
        if len(batch) >= BATCH:
            flush()
    if batch:
        flush()


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0009_merge_superseded_runs_and_signature_counts"),
        ("suites", "0002_suite_team"),
    ]

    operations = [
        migrations.CreateModel(
            name="SignatureVariant",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("digest", models.CharField(max_length=32)),
                ("items", models.JSONField(default=list)),
                ("items_hash", models.CharField(max_length=64, unique=True)),
            ],
        ),
        migrations.CreateModel(
            name="AttemptSignature",
            fields=[
                (
                    "attempt",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="failure_signature",
                        serialize=False,
                        db_constraint=False,
                        to="campaigns.attempt",
                    ),
                ),
                ("digest", models.CharField(max_length=32)),
                ("termination", models.CharField(blank=True, max_length=20)),
                ("clean_looking", models.BooleanField(default=False)),
                (
                    "campaign",
                    models.ForeignKey(
                        db_index=False,
                        db_constraint=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="campaigns.campaign",
                    ),
                ),
                (
                    "task",
                    models.ForeignKey(
                        db_index=False,
                        db_constraint=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="suites.task",
                    ),
                ),
                (
                    "variant",
                    models.ForeignKey(
                        db_index=False,
                        db_constraint=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="campaigns.signaturevariant",
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(fields=["campaign", "task"], name="attempt_signature_pair"),
                    models.Index(fields=["digest", "campaign"], name="attempt_signature_digest"),
                ],
            },
        ),
        migrations.RunPython(copy_signatures, migrations.RunPython.noop),
        migrations.RemoveIndex(model_name="attempt", name="attempt_signature_campaign"),
        migrations.RemoveField(model_name="attempt", name="signature"),
        migrations.RemoveField(model_name="attempt", name="signature_items"),
        # Derived rows: no database constraint (see AttemptSignature's docstring).
        migrations.AlterField(
            model_name="signaturecount",
            name="campaign",
            field=models.ForeignKey(
                db_constraint=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="signature_counts",
                to="campaigns.campaign",
            ),
        ),
        migrations.AlterField(
            model_name="signaturecount",
            name="task",
            field=models.ForeignKey(
                db_constraint=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="signature_counts",
                to="suites.task",
            ),
        ),
    ]
