"""python manage.py backfill_process_risk [--campaign ID ...] [--recompute]"""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand

from apps.attempts.services import attempts_backfill_process_risk
from apps.suites.models import Task
from apps.worker.selectors import task_domain, task_spec_of
from tb_engine.golden import GoldenReplayError
from tb_engine.process import ProcessReport
from tb_engine.process_check import analyse_stored
from tb_engine.result_format import ResultFormatError
from tb_engine.results import AttemptResult


class Command(BaseCommand):
    help = (
        "Give stored done attempts their process-risk rows (docs/process_risk.md). New attempts get them "
        "when they are recorded; run this once after upgrading, and with --recompute after process rules change."
    )

    def add_arguments(self, parser):
        parser.add_argument("--campaign", type=int, action="append", help="only this campaign (repeatable)")
        parser.add_argument(
            "--recompute", action="store_true", help="analyse every done attempt again with the current rules"
        )

    def handle(self, *args, **options):
        started = time.perf_counter()
        tasks: dict[int, Task] = {}

        def analyse(task_id: int, result: dict[str, Any]) -> ProcessReport | None:
            task = tasks.get(task_id)
            if task is None:
                task = tasks[task_id] = Task.objects.select_related("suite", "domain").get(pk=task_id)
            try:
                return analyse_stored(AttemptResult.from_dict(result), task_domain(task), task_spec_of(task))
            except (ResultFormatError, KeyError, ValueError, GoldenReplayError):
                return None

        report = attempts_backfill_process_risk(
            analyse_stored=analyse, campaign_ids=options["campaign"], recompute=options["recompute"]
        )
        seconds = time.perf_counter() - started
        self.stdout.write(
            f"{report.scanned} done attempts read, {report.analysed} analysed now, {report.written} with "
            f"process findings, {report.unanalysable} not analysable, {seconds:.1f}s"
        )
