"""Both 0008 migrations (superseded runs billed; signature counts) side by side."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0008_attempt_superseded_runs"),
        ("campaigns", "0008_signature_count"),
    ]

    operations = []
