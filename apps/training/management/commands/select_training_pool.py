"""manage.py select_training_pool --campaign ID [--lo --hi --q] --out FILE [--allow-evaluation-only]"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from apps.campaigns.models import Campaign
from apps.training.pools import EvaluationOnlyRefused, Thresholds, training_pool, write_pool
from tb_engine.metrics import LEARNING_ZONE_HI, LEARNING_ZONE_LO, LEARNING_ZONE_Q, MetricsInputError


class Command(BaseCommand):
    help = "Write the fixed training pool (learning-zone tasks of a base campaign) as JSON."

    def add_arguments(self, parser):
        parser.add_argument("--campaign", type=int, required=True, help="base campaign id")
        parser.add_argument("--lo", type=float, default=LEARNING_ZONE_LO)
        parser.add_argument("--hi", type=float, default=LEARNING_ZONE_HI)
        parser.add_argument("--q", type=float, default=LEARNING_ZONE_Q)
        parser.add_argument("--out", required=True, help="pool JSON file to write")
        parser.add_argument(
            "--allow-evaluation-only", action="store_true", help="select from an evaluation-only suite anyway"
        )

    def handle(self, *args, **options):
        campaign = Campaign.objects.select_related("suite", "agent").filter(pk=options["campaign"]).first()
        if campaign is None:
            raise CommandError(f"--campaign: no campaign with id {options['campaign']}")
        thresholds = Thresholds(options["lo"], options["hi"], options["q"])
        try:
            pool = training_pool(campaign, thresholds, allow_evaluation_only=options["allow_evaluation_only"])
        except EvaluationOnlyRefused as exc:
            raise CommandError(str(exc)) from exc
        except MetricsInputError as exc:
            raise CommandError(f"--lo/--hi/--q: {exc}") from exc
        path = write_pool(pool, options["out"])
        self.stdout.write(
            f"{len(pool['tasks'])} of {pool['candidates']} task(s) in the learning zone "
            f"(lo={thresholds.lo:g}, hi={thresholds.hi:g}, q={thresholds.q:g}) -> {path}"
        )
