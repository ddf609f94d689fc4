"""The release gate over stored campaigns: rules, their values and verdicts (typed), for the command and the API.

Rules are tb_engine.metrics.gate's: minimum pass@1 / all-N share on the point estimate, and a
maximum drop from a baseline that fails only when it clears the noise floor (SPEC §9). Figures come
from the figures app, so the gate reads exactly what the pages and the API show.
"""

from __future__ import annotations

import time
from dataclasses import asdict

from apps.campaigns.models import Campaign
from apps.figures import selectors as figures
from apps.gates.report import GateReport, junit_xml, text_table
from tb_engine.metrics.gate import GateInputError, RuleResult, evaluate

__all__ = ["GateInputError", "GateReport", "RuleResult", "gate_report", "junit_xml", "text_table"]


def gate_report(
    *,
    campaign: Campaign,
    baseline: Campaign | None = None,
    min_pass1: float | None = None,
    min_all_n: float | None = None,
    max_drop_pp: float | None = None,
    domain: str = "",
) -> GateReport:
    """Evaluate the chosen rules; GateInputError for a rule that cannot be evaluated as asked.

    Campaigns must be finished (a running campaign's figures are partial) and, with a baseline,
    have the same N (all-N is only comparable at equal N).
    """
    started = time.perf_counter()
    for role, chosen in (("campaign", campaign), ("baseline", baseline)):
        if chosen is not None and chosen.status != Campaign.Status.DONE:
            raise GateInputError(
                f"{role}: campaign {chosen.pk} ({chosen.name}) is {chosen.get_status_display().lower()}; gate a finished campaign"
            )
    if baseline is not None and baseline.pk == campaign.pk:
        raise GateInputError("baseline: must be another campaign than the one gated")
    tables = figures.per_task_tables([c for c in (campaign, baseline) if c is not None])
    own = figures.campaign_figures(tables, campaign, domain=domain)
    if domain and own.coverage.tasks == 0:
        raise GateInputError(f"domain: campaign {campaign.pk} ran no task of domain {domain!r}")
    compared = None
    if baseline is not None:
        try:
            compared = figures.comparison(tables, campaign, baseline, domain=domain)
        except ValueError as exc:
            raise GateInputError(f"baseline: {exc}") from None
    rules = evaluate(
        asdict(own),
        asdict(compared) if compared is not None else None,
        min_pass1=min_pass1,
        min_all_n=min_all_n,
        max_drop_pp=max_drop_pp,
    )
    return GateReport(
        campaign=campaign,
        baseline=baseline,
        domain=domain,
        tasks=own.coverage.tasks,
        shared_tasks=compared.tasks if compared is not None else None,
        rules=tuple(rules),
        seconds=time.perf_counter() - started,
    )
