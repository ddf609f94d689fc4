"""Process-risk rows (AttemptProcessRisk) from stored results: the record paths and the backfill write them here."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from apps.attempts.models import Attempt, AttemptProcessRisk
from tb_engine.process import FINDING_KINDS, ProcessReport


@dataclass(frozen=True)
class ProcessRow:
    attempt_id: int
    campaign_id: int
    task_id: int
    passed: bool
    report: ProcessReport

    def model(self) -> AttemptProcessRisk:
        counts = self.report.counts()
        return AttemptProcessRisk(
            attempt_id=self.attempt_id,
            campaign_id=self.campaign_id,
            task_id=self.task_id,
            passed=self.passed,
            findings=[f.to_dict() for f in self.report.findings],
            coverage=self.report.coverage,
            **{kind: counts[kind] for kind in FINDING_KINDS},
        )


def process_row(
    *, attempt_id: int, campaign_id: int, task_id: int, status: str, verdict: str, result: Mapping[str, Any]
) -> ProcessRow | None:
    """The row of a done attempt whose stored result holds findings (None: no finding, or not analysed)."""
    if status != "done":
        return None
    process = (result.get("extra") or {}).get("process")
    if not isinstance(process, Mapping):
        return None
    report = ProcessReport.from_dict(process)
    if not report.findings:
        return None
    return ProcessRow(attempt_id, campaign_id, task_id, verdict == "pass", report)


def process_rows_store(rows: Iterable[ProcessRow], *, attempt_ids: Iterable[int]) -> int:
    """Replace the process-risk rows of ``attempt_ids`` with ``rows``; how many were written.

    Side effects: deletes then inserts AttemptProcessRisk rows (idempotent: a re-run writes the same).
    """
    ids = list(attempt_ids)
    AttemptProcessRisk.objects.filter(attempt_id__in=ids).delete()
    made = AttemptProcessRisk.objects.bulk_create([row.model() for row in rows])
    return len(made)


@dataclass(frozen=True)
class ProcessBackfill:
    scanned: int
    analysed: int  # attempts analysed now (their stored result had no process analysis, or recompute)
    written: int  # rows written (attempts with findings)
    unanalysable: int  # attempts the analyser could not analyse (task gone, no golden footprint …)


BACKFILL_CHUNK = 500


def backfill_process_rows(
    *,
    analyse_stored: Callable[[int, dict[str, Any]], ProcessReport | None],
    campaign_ids: list[int] | None = None,
    recompute: bool = False,
) -> ProcessBackfill:
    """Process-risk rows for stored done attempts: from each result's own analysis, or (none stored,
    or ``recompute``) from ``analyse_stored(task_id, result)``. Never touches the attempt row."""
    done = Attempt.objects.filter(status=Attempt.Status.DONE)
    if campaign_ids:
        done = done.filter(campaign_id__in=campaign_ids)
    ids = list(done.order_by("id").values_list("id", flat=True))
    scanned = analysed = written = unanalysable = 0
    for start in range(0, len(ids), BACKFILL_CHUNK):
        chunk = ids[start : start + BACKFILL_CHUNK]
        rows = []
        for attempt_id, campaign_id, task_id, verdict, result in Attempt.objects.filter(
            id__in=chunk
        ).values_list("id", "campaign_id", "task_id", "verdict", "result"):
            scanned += 1
            stored = (result.get("extra") or {}).get("process")
            if recompute or not isinstance(stored, Mapping):
                report = analyse_stored(task_id, result)
                if report is None:
                    unanalysable += 1
                    continue
                analysed += 1
            else:
                report = ProcessReport.from_dict(stored)
            if report.findings:
                rows.append(ProcessRow(attempt_id, campaign_id, task_id, verdict == "pass", report))
        written += process_rows_store(rows, attempt_ids=chunk)
    return ProcessBackfill(scanned, analysed, written, unanalysable)
