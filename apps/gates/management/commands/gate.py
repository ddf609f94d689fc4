"""python manage.py gate --campaign ID [--baseline ID] [--min-pass1 X] [--min-all-n X] [--max-drop-pp X]
[--domain D] [--junit FILE]: exit 0 when every rule holds, 1 when one fails, 2 when the gate cannot run."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.campaigns.models import Campaign
from apps.gates.selectors import GateInputError, gate_report, junit_xml, text_table

EXIT_FAILED = 1
EXIT_UNUSABLE = 2


class Command(BaseCommand):
    help = (
        "Release gate for CI: minimum pass@1 / all-N share, and a maximum drop from a baseline that fails "
        "only when it clears the noise floor. Exit code 0 pass, 1 a rule failed, 2 the gate cannot run."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--campaign", type=int, required=True, help="id of the (finished) campaign to gate"
        )
        parser.add_argument("--baseline", type=int, help="id of the campaign drops are measured from")
        parser.add_argument("--min-pass1", type=float, help="minimum pass@1, a share (0.6 = 60%%)")
        parser.add_argument("--min-all-n", type=float, help="minimum all-N share, a share (0.3 = 30%%)")
        parser.add_argument(
            "--max-drop-pp",
            type=float,
            help="largest allowed drop of pass@1 and of the all-N share from the baseline, in percentage "
            "points; a larger drop fails only when it clears the noise floor",
        )
        parser.add_argument("--domain", default="", help="only the tasks of this domain")
        parser.add_argument("--junit", type=Path, help="also write JUnit XML here (for CI)")

    def handle(self, *args, **options):
        campaign = self._campaign(options["campaign"], "campaign")
        baseline = self._campaign(options["baseline"], "baseline") if options["baseline"] else None
        try:
            report = gate_report(
                campaign=campaign,
                baseline=baseline,
                min_pass1=options["min_pass1"],
                min_all_n=options["min_all_n"],
                max_drop_pp=options["max_drop_pp"],
                domain=options["domain"],
            )
        except GateInputError as exc:
            raise CommandError(str(exc), returncode=EXIT_UNUSABLE) from None
        self.stdout.write(text_table(report), ending="")
        if options["junit"]:
            options["junit"].parent.mkdir(parents=True, exist_ok=True)
            options["junit"].write_text(junit_xml(report), encoding="utf-8")
            self.stdout.write(f"JUnit XML written to {options['junit']}")
        if not report.passed:
            raise SystemExit(EXIT_FAILED)

    def _campaign(self, pk: int, what: str) -> Campaign:
        campaign = Campaign.objects.select_related("price_sheet", "agent").filter(pk=pk).first()
        if campaign is None:
            raise CommandError(f"{what}: no campaign with id {pk}", returncode=EXIT_UNUSABLE)
        return campaign
