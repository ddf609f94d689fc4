"""python manage.py backfill_signatures [--campaign ID ...] [--recompute]"""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand

from apps.attempts.services import attempts_backfill_signatures


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
        self.stdout.write(
            f"{report.scanned} failed attempts read, {report.changed} signatures written "
            f"in {report.campaigns} campaign(s), {seconds:.1f}s"
        )
