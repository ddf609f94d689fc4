"""manage.py select_training_pool --campaign ID [--select zone|band] [--lo --hi --q] [--band-lo --band-hi]
[--reference ID] --out FILE [--allow-evaluation-only]"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from apps.campaigns.models import Campaign
from apps.training.selectors import (
    BAND_HI,
    BAND_LO,
    SELECTION_METHODS,
    EvaluationOnlyRefused,
    Selection,
    Thresholds,
    training_pool,
    write_pool,
)
from tb_engine.metrics import LEARNING_ZONE_HI, LEARNING_ZONE_LO, LEARNING_ZONE_Q, MetricsInputError


class Command(BaseCommand):
    help = "Write the fixed training pool (learning-zone tasks of a base campaign) as JSON."

    def add_arguments(self, parser):
        parser.add_argument("--campaign", type=int, required=True, help="base campaign id")
        parser.add_argument("--lo", type=float, default=LEARNING_ZONE_LO)
        parser.add_argument("--hi", type=float, default=LEARNING_ZONE_HI)
        parser.add_argument("--q", type=float, default=LEARNING_ZONE_Q)
        parser.add_argument(
            "--select",
            choices=SELECTION_METHODS,
            default="zone",
            help="learning zone, or a band of base pass rate",
        )
        parser.add_argument("--band-lo", type=float, default=BAND_LO, help="lowest base pass rate c/n kept")
        parser.add_argument("--band-hi", type=float, default=BAND_HI, help="highest base pass rate c/n kept")
        parser.add_argument(
            "--reference",
            type=int,
            help="campaign id: keep only tasks it solved at least once (e.g. a stronger model)",
        )
        parser.add_argument("--out", required=True, help="pool JSON file to write")
        parser.add_argument(
            "--allow-evaluation-only", action="store_true", help="select from an evaluation-only suite anyway"
        )

    def handle(self, *args, **options):
        campaign = Campaign.objects.select_related("suite", "agent").filter(pk=options["campaign"]).first()
        if campaign is None:
            raise CommandError(f"--campaign: no campaign with id {options['campaign']}")
        reference = None
        if options["reference"] is not None:
            reference = Campaign.objects.select_related("agent").filter(pk=options["reference"]).first()
            if reference is None:
                raise CommandError(f"--reference: no campaign with id {options['reference']}")
        thresholds = Thresholds(options["lo"], options["hi"], options["q"])
        try:
            selection = Selection(options["select"], options["band_lo"], options["band_hi"], reference)
            pool = training_pool(
                campaign, thresholds, selection, allow_evaluation_only=options["allow_evaluation_only"]
            )
        except EvaluationOnlyRefused as exc:
            raise CommandError(str(exc)) from exc
        except MetricsInputError as exc:
            options_named = "--band-lo/--band-hi" if str(exc).startswith("band:") else "--lo/--hi/--q"
            raise CommandError(f"{options_named}: {exc}") from exc
        path = write_pool(pool, options["out"])
        rule = (
            f"in the learning zone (lo={thresholds.lo:g}, hi={thresholds.hi:g}, q={thresholds.q:g})"
            if selection.method == "zone"
            else f"with base pass rate in [{selection.band_lo:g}, {selection.band_hi:g}]"
        )
        if reference is not None:
            rule += f" and solved at least once by reference campaign {reference.pk}"
        self.stdout.write(f"{len(pool['tasks'])} of {pool['candidates']} task(s) {rule} -> {path}")
