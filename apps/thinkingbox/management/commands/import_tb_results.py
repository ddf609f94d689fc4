"""python manage.py import_tb_results FILE.jsonl --campaign NAME [--suite NAME] [--team SLUG] [--owner USERNAME]"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from apps.core.models import Team
from apps.thinkingbox.services import figures_side_by_side, tb_results_import
from tb_engine.thinkingbox import ThinkingBoxFormatError, format_tb_agg_summary


class Command(BaseCommand):
    help = "Import tb infer output (JSONL, or one YAML result) as a finished campaign, and compare figures with tb agg."

    def add_arguments(self, parser):
        parser.add_argument(
            "file", help="tb infer output: .jsonl (one row per attempt) or a single-result .yaml"
        )
        parser.add_argument("--campaign", required=True, help="name of the campaign to create")
        parser.add_argument(
            "--suite", help="imported suite holding the tests (default: any ThinkingBox suite that does)"
        )
        parser.add_argument("--team", help="team slug (default: the only team)")
        parser.add_argument("--owner", help="username owning the campaign (default: the team's first member)")

    def _team(self, slug: str | None) -> Team:
        if slug:
            team = Team.objects.filter(slug=slug).first()
            if team is None:
                raise CommandError(f"--team {slug!r}: no such team")
            return team
        teams = list(Team.objects.all()[:2])
        if len(teams) != 1:
            raise CommandError("--team is required when there is not exactly one team")
        return teams[0]

    def handle(self, *args, **options):
        team = self._team(options["team"])
        owner = None
        if options["owner"]:
            owner = get_user_model().objects.filter(username=options["owner"]).first()
            if owner is None:
                raise CommandError(f"--owner {options['owner']!r}: no such user")
        try:
            report = tb_results_import(
                path=options["file"],
                campaign_name=options["campaign"],
                team=team,
                owner=owner,
                suite_name=options["suite"],
            )
        except ThinkingBoxFormatError as exc:
            raise CommandError(str(exc)) from exc
        campaign = report.campaign
        where = "a minimal suite created from the rows" if report.suite_created else "imported suite"
        self.stdout.write(
            f"Campaign {campaign.name} (id {campaign.pk}): {report.attempts} attempt(s) on {where} {campaign.suite.name}."
        )
        if report.disagreements:
            self.stdout.write(
                self.style.WARNING(
                    f"{report.disagreements} attempt(s): our state verdict disagrees with ThinkingBox's hash."
                )
            )
        self.stdout.write("\nWhat tb agg prints (error rows counted as failures):")
        self.stdout.write(format_tb_agg_summary(report.tb_agg))
        self.stdout.write("\nSide by side:")
        rows = [("figure", "tb agg", "ours", "note"), *figures_side_by_side(report.tb_agg, report.ours)]
        widths = [max(len(row[i]) for row in rows) for i in range(3)]
        for row in rows:
            self.stdout.write(
                "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3]))
                + ("  " + row[3] if row[3] else "")
            )
