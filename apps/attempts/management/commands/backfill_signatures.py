"""python manage.py backfill_signatures [--campaign ID ...] [--recompute]"""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand

from apps.attempts.models import campaign_model
from apps.attempts.services import attempts_backfill_signatures
from thinkingbox_web.celery import app as celery_app

# apps.triage.tasks' name (apps.campaigns.services.CLUSTERS_STORE_TASK; attempts sits below both).
CLUSTERS_STORE_TASK = "triage.clusters_store"


class Command(BaseCommand):
    help = (
        "Give stored failed attempts their failure signature (SPEC §8). New attempts get it when they "
        "are recorded; run this once after upgrading, and with --recompute after the signature definition changed."
    )

    def add_arguments(self, parser):
        parser.add_argument("--campaign", type=int, action="append", help="only this campaign (repeatable)")
        parser.add_argument(
            "--recompute",
            action="store_true",
            help="recompute every failed attempt, not only those without one",
        )

    def handle(self, *args, **options):
        started = time.perf_counter()
        report = attempts_backfill_signatures(
            campaign_ids=options["campaign"], recompute=options["recompute"]
        )
        seconds = time.perf_counter() - started
        if report.changed:
            # The grouped triage queues of the campaigns' teams are stored again by a worker
            # (apps.triage.tasks, sent by name: triage sits above this app).
            ids = options["campaign"] or list(campaign_model().objects.values_list("pk", flat=True))
            try:
                celery_app.signature(CLUSTERS_STORE_TASK, args=(ids,)).apply_async()
            except Exception as exc:
                self.stderr.write(f"grouped triage queues not queued for storing: {exc}")
        self.stdout.write(
            f"{report.scanned} failed attempts read, {report.changed} signatures written "
            f"in {report.campaigns} campaign(s), {seconds:.1f}s"
        )
