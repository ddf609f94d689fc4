"""python manage.py export_procurement --campaign 3 --campaign 5 --out procurement.xlsx"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.campaigns.models import Campaign
from apps.exports.procurement import build_workbook
from apps.exports.review import ReviewerAsks


class Command(BaseCommand):
    help = (
        "Write the procurement workbook (summary, when they ran, ranking, chosen vs runner-up, cost at "
        "your target, per domain, per task, methodology & provenance) for campaigns."
    )

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
        defaults = ReviewerAsks()
        parser.add_argument(
            "--target",
            type=float,
            default=defaults.target_percent,
            metavar="PERCENT",
            help="cost sheet: dependable on at least this %% of tasks (default %(default)s)",
        )
        parser.add_argument(
            "--budget",
            type=float,
            default=defaults.budget,
            metavar="DOLLARS",
            help="cost sheet: budget in $ per 1,000 tasks (default %(default)s)",
        )

    def handle(self, *args, campaign: list[int], out: str, target: float, budget: float, **options):
        found = Campaign.objects.select_related("agent", "suite", "price_sheet").in_bulk(campaign)
        missing = [str(pk) for pk in campaign if pk not in found]
        if missing:
            raise CommandError(f"--campaign: no campaign with id {', '.join(missing)}")
        if not out.endswith(".xlsx"):
            raise CommandError(f"--out: {out!r} must end with .xlsx")
        ordered = [found[pk] for pk in dict.fromkeys(campaign)]
        asks = ReviewerAsks(target_percent=target, budget=budget)
        content, digest = build_workbook(campaigns=ordered, asks=asks)
        Path(out).write_bytes(content)
        self.stdout.write(
            f"wrote {out} ({len(content)} bytes) for {len(ordered)} campaign(s); content sha256 {digest}"
        )
