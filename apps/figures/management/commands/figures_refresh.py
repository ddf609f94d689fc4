"""manage.py figures_refresh [--campaign ID ...]: store every campaign's figures at its current summaries."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand

from apps.campaigns.models import Campaign
from apps.figures.services import figures_refresh


class Command(BaseCommand):
    help = "Compute and store the per-campaign figures the dashboard reads (after an import or an upgrade)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--campaign", type=int, action="append", help="only these campaigns (repeatable)")

    def handle(self, *args, **options) -> None:
        ids = options["campaign"] or list(Campaign.objects.values_list("pk", flat=True))
        started = time.perf_counter()
        count = figures_refresh(campaign_ids=ids)
        self.stdout.write(f"stored the figures of {count} campaigns in {time.perf_counter() - started:.1f} s")
