"""manage.py regrade: re-grade stored attempts without re-running them (issue 29).

regrade preview --campaign ID [--campaign ID …] | --team SLUG   grade again, print the impact report
regrade report RUN [--xlsx PATH]                                print (and write) a re-grade's report
regrade apply RUN                                               the preview's verdicts become the figures'
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.campaigns.models import Campaign
from apps.core.models import Team
from apps.regrade.models import RegradeRun
from apps.regrade.selectors import impact_report, impact_text, impact_workbook
from apps.regrade.services import RegradeError, regrade_apply, regrade_preview


class Command(BaseCommand):
    help = "Re-grade stored attempts against the task definitions and grader of now (preview, report, apply)."

    def add_arguments(self, parser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        preview = actions.add_parser(
            "preview", help="re-grade campaigns as a preview and print the impact report"
        )
        preview.add_argument("--campaign", type=int, action="append", help="campaign id (repeatable)")
        preview.add_argument("--team", help="every campaign of this team (slug)")
        preview.add_argument("--xlsx", type=Path, help="also write the report as an XLSX file")
        preview.add_argument(
            "--workers", type=int, default=1, help="re-grading processes (PostgreSQL only; default 1)"
        )
        report = actions.add_parser("report", help="print a re-grade's impact report")
        report.add_argument("run", type=int)
        report.add_argument("--xlsx", type=Path, help="also write the report as an XLSX file")
        apply = actions.add_parser("apply", help="apply a preview re-grade")
        apply.add_argument("run", type=int)

    def handle(self, *args, **options) -> None:
        try:
            if options["action"] == "preview":
                run = self._preview(options)
            else:
                found = RegradeRun.objects.filter(pk=options["run"]).first()
                if found is None:
                    raise CommandError(f"no re-grade #{options['run']}")
                run = found
                if options["action"] == "apply":
                    run = regrade_apply(run=run)
        except RegradeError as exc:
            raise CommandError(str(exc)) from exc
        report = impact_report(run)
        self.stdout.write(impact_text(report))
        if options.get("xlsx"):
            options["xlsx"].write_bytes(impact_workbook(report))
            self.stdout.write(f"wrote {options['xlsx']}")

    def _preview(self, options) -> RegradeRun:
        if options["team"]:
            team = Team.objects.filter(slug=options["team"]).first()
            if team is None:
                raise CommandError(f"no team {options['team']!r}")
            ids = list(Campaign.objects.filter(team=team).values_list("pk", flat=True))
        elif options["campaign"]:
            ids = options["campaign"]
            teams = set(Campaign.objects.filter(pk__in=ids).values_list("team_id", flat=True))
            if len(teams) != 1:
                raise CommandError("the campaigns must exist and belong to one team")
            team = Team.objects.get(pk=teams.pop())
        else:
            raise CommandError("name the campaigns (--campaign ID …) or a team (--team SLUG)")
        return regrade_preview(campaign_ids=ids, team_id=team.pk, workers=options["workers"])
