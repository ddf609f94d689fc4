"""python manage.py calibrate_suite --suite NAME [--team NAME] [--no-validate]"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from apps.adaptive.services import calibration_create, engine_calibration
from apps.core.models import Team
from apps.suites.models import Suite
from tb_engine.irt import CalibrationError


class Command(BaseCommand):
    help = "Calibrate the item response model of a suite on a team's finished full campaigns."

    def add_arguments(self, parser):
        parser.add_argument("--suite", default="starter")
        parser.add_argument("--team", help="team name (default: the only team, else required)")
        parser.add_argument("--no-validate", action="store_true", help="skip leave-one-campaign-out")

    def handle(self, *args, **options):
        suite = Suite.objects.filter(name=options["suite"]).first()
        if suite is None:
            raise CommandError(f"unknown suite {options['suite']!r}")
        teams = Team.objects.all() if not options["team"] else Team.objects.filter(name=options["team"])
        if teams.count() != 1:
            raise CommandError("pass --team NAME (exactly one team must match)")
        try:
            row = calibration_create(suite=suite, team=teams.get(), validate=not options["no_validate"])
        except CalibrationError as exc:
            raise CommandError(str(exc)) from None
        cal = engine_calibration(row)
        self.stdout.write(
            f"calibration {row.pk}: {suite.name} v{row.version} on {row.n_campaigns} campaigns, "
            f"{row.n_tasks} tasks, {row.seconds:.1f} s; {cal.dimension_note}"
        )
        if row.validation:
            v = row.validation
            self.stdout.write(
                f"leave-one-campaign-out: pass@1 MAE {v['pass_at_1_mae_pp']:.2f} pp, all-N MAE "
                f"{v['all_n_mae_pp']:.2f} pp, attempts {100 * v['attempts_share']:.0f}%, "
                f"95% coverage {100 * v['coverage']:.0f}%"
            )
