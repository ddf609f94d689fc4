"""Seed the failure taxonomy (apps/triage/taxonomy.py)."""

from django.db import migrations

from apps.triage.taxonomy import SEED, seed_labels


def seed(apps, schema_editor):
    seed_labels(apps.get_model("triage", "Label"))


def unseed(apps, schema_editor):
    apps.get_model("triage", "Label").objects.filter(name__in=[row[0] for row in SEED], reviews__isnull=True).delete()


class Migration(migrations.Migration):
    dependencies = [("triage", "0001_initial")]
    operations = [migrations.RunPython(seed, unseed)]
