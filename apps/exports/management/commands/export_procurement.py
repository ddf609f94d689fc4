"""python manage.py export_procurement --campaign 3 --campaign 5 --out procurement.xlsx"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.campaigns.models import Campaign
from apps.exports.procurement import build_workbook


class Command(BaseCommand):
    help = "Write the procurement workbook (summary, per domain, per task, methodology & provenance) for campaigns."

    def add_arguments(self, parser):
        parser.add_argument(
            "--campaign",
            type=int,
            action="append",
            required=True,
            metavar="ID",
            help="repeat for several campaigns",
        )
        parser.add_argument("--out", required=True, metavar="FILE.xlsx")

    def handle(self, *args, campaign: list[int], out: str, **options):
        found = Campaign.objects.select_related("agent", "suite", "price_sheet").in_bulk(campaign)
        missing = [str(pk) for pk in campaign if pk not in found]
        if missing:
            raise CommandError(f"--campaign: no campaign with id {', '.join(missing)}")
        if not out.endswith(".xlsx"):
            raise CommandError(f"--out: {out!r} must end with .xlsx")
        ordered = [found[pk] for pk in dict.fromkeys(campaign)]
        content, digest = build_workbook(campaigns=ordered)
        Path(out).write_bytes(content)
        self.stdout.write(
            f"wrote {out} ({len(content)} bytes) for {len(ordered)} campaign(s); content sha256 {digest}"
        )
