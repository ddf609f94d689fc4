"""Dashboard pages. Each view starts with the viewer-role check and only reads visible campaigns.

One view serves the full page and, for htmx requests, only the named partial (its DOM id).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pandas as pd
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.attempts.selectors.faults import fault_figures_by_campaign
from apps.attempts.selectors.process_risk import campaign_process_risk
from apps.campaigns.models import Campaign
from apps.campaigns.selectors import campaign_robustness, campaigns_visible_to
from apps.core.access import require_role, teams_for, user_has_role
from apps.core.charts import chart
from apps.core.roles import Role
from apps.dashboard import charts, services
from apps.dashboard.forms import ExternalScoreForm, WhatIfPriceForm
from apps.dashboard.fragments import shared_fragment
from apps.dashboard.selectors import common_ground, compare_verdict, external_scores, ranked_order
from apps.drift.selectors import open_alert_count
from apps.figures import selectors as figures
from apps.regrade.selectors import figure_versions
from apps.suites.models import Task
from apps.triage.selectors import judge_note_rows, task_health_scope
from tb_engine.metrics import spearman

TASKS_PER_PAGE = 50


def _render(request, template: str, partial: str, context: dict):
    return render(request, f"{template}#{partial}" if request.htmx else template, context)


def _selected_ids(request) -> list[int] | None:
    ids = [value for value in request.GET.getlist("c") if value.isdigit()]
    return [int(value) for value in ids] or None


# Column presets of the leaderboard: what each job needs on one screen ("all" shows every column).
# Rank and campaign are always shown; $/dependable task is in every preset, since it is the one
# cost figure that charges for unreliability.
LEADERBOARD_COLUMNS = (
    "pass1",
    "pass5",
    "pass10",
    "passn",
    "hat5",
    "hatn",
    "observed",
    "alln",
    "gap",
    "tokens",
    "cost_attempt",
    "cost_success",
    "cost_dependable",
    "infra",
    "fault_plan",
    "recovery",
    "duplicates",
    "unfired",
    # Process risk (docs/process_risk.md): passing attempts with findings, over the whole campaign.
    "risk",
    "risk_reverted",
    "risk_footprint",
    "risk_rules",
)
# Columns read from the stored fault records of campaigns run under a fault plan (docs/faults.md).
ROBUSTNESS_COLUMNS = ("fault_plan", "recovery", "duplicates", "unfired")
RISK_COLUMNS = {
    "risk_reverted": "write_reverted",
    "risk_footprint": "outside_footprint",
    "risk_rules": "write_before_required_step",
}
PRESETS = {
    "reliability": ("Reliability", ("pass1", "hat5", "hatn", "alln", "gap", "cost_dependable", "infra")),
    "cost": ("Cost", ("alln", "tokens", "cost_attempt", "cost_success", "cost_dependable", "infra")),
    "discovery": ("Discovery", ("pass1", "pass5", "pass10", "passn", "observed", "gap", "cost_dependable")),
    "robustness": (
        "Robustness",
        ("pass1", "alln", "fault_plan", "recovery", "duplicates", "unfired", "cost_dependable", "infra"),
    ),
    "process": (
        "Process risk",
        ("pass1", "alln", "risk", "risk_reverted", "risk_footprint", "risk_rules", "cost_dependable"),
    ),
    "all": ("All columns", LEADERBOARD_COLUMNS),
}


def _figure_version_rows(campaigns: list) -> list[tuple[object, object]]:
    versions = figure_versions(campaigns)
    return [(campaign, versions[campaign.pk]) for campaign in campaigns]


@require_GET
@require_role(Role.VIEWER)
def leaderboard(request):
    """Campaign leaderboard over a task slice, ranked by all-N (dependability) unless sorted otherwise.

    Harness self-checks (golden replays) are pinned above the ranking, never ranked among models.
    """
    visible = figures.figure_campaigns(request.user, with_price_sheets=False, with_people=False)
    harness = [c for c in visible if c.is_harness_check]
    campaigns = [c for c in visible if not c.is_harness_check]
    domain, tag = request.GET.get("domain", ""), request.GET.get("tag", "")
    sort = request.GET.get("sort", "alln")
    sort = sort if sort in figures.LEADERBOARD_SORTS else "alln"
    descending = request.GET.get("dir", "desc" if sort != "name" else "asc") == "desc"
    preset = request.GET.get("preset", "reliability")
    preset = preset if preset in PRESETS else "reliability"
    # Triage: tasks with open health issues (grader bug, ambiguous) can be left out of every figure.
    health = task_health_scope(request.GET, visible)
    healthy = health.context()["healthy"]
    rank_by = figures.rank_metric(sort)
    # One read of the campaigns' stamps for the rows and the common ground below.
    tables = figures.per_task_tables(campaigns, exclude=health.exclude)
    rows = figures.sort_rows(
        figures.leaderboard_rows(
            campaigns, domain=domain, tag=tag, exclude=health.exclude, rank_by=rank_by, tables=tables
        ),
        key=sort,
        descending=descending,
    )
    harness_rows = (
        figures.leaderboard_rows(harness, domain=domain, tag=tag, exclude=health.exclude) if harness else []
    )
    # Campaigns that ran different tasks or N are never ranked on their own figures (issue 30): the
    # ranking is on the tasks all of them ran and the smallest N, and the page says so.
    ground = common_ground(
        [row.campaign for row in rows], domain=domain, tag=tag, exclude=health.exclude, tables=tables
    )
    if not ground.comparable and sort in figures.BAND_SORTS:
        rows = ranked_order(ground, rows)
    external = external_scores(campaigns=[row.campaign for row in rows])
    benchmarks, correlations = _correlations(rows, external)
    domains, tags = figures.filter_options(visible)
    filter_query = urlencode(
        {
            key: value
            for key, value in (("domain", domain), ("tag", tag), ("healthy", healthy), ("preset", preset))
            if value
        }
    )
    columns = PRESETS[preset][1]
    can_edit = user_has_role(request.user, Role.OPERATOR)
    faulted = [row.campaign.pk for row in rows if row.campaign.fault_plan]
    robustness = (
        fault_figures_by_campaign(campaign_ids=faulted) if set(ROBUSTNESS_COLUMNS) & set(columns) else {}
    )
    # Two queries, only for the presets that show process risk.
    risk = (
        campaign_process_risk(campaign_ids=[row.campaign.pk for row in rows])
        if any(column.startswith("risk") for column in columns)
        else {}
    )
    context = {
        "risk": risk,
        "risk_columns": [(column, RISK_COLUMNS[column]) for column in columns if column in RISK_COLUMNS],
        "rows": rows,
        "harness_rows": harness_rows,
        "groups": _band_groups(rows, grouped=sort in figures.BAND_SORTS and ground.comparable),
        "ground": ground,
        "rank_label": figures.METRIC_LABELS[rank_by],
        "drift_alerts": open_alert_count(user=request.user),
        "external": external,
        "domain": domain,
        "tag": tag,
        "sort": sort,
        "descending": descending,
        "preset": preset,
        "presets": [(key, label) for key, (label, _) in PRESETS.items()],
        "cols": columns,
        "robustness": robustness,
        "colspan": 2 + len(columns) + len(benchmarks) + (0 if ground.comparable else 2),
        "metric_span": len(columns),
        **health.context(),
        "export_query": f"{filter_query}&sort={sort}&dir={'desc' if descending else 'asc'}".lstrip("&"),
        "base_query": filter_query,
        "domains": domains,
        "tags": tags,
        "benchmarks": benchmarks,
        "correlations": correlations,
        # Shown to operators only (the form builds a choice per visible campaign): not built for viewers.
        "score_form": ExternalScoreForm(campaigns=visible) if can_edit else None,
        "can_edit": can_edit,
        "judge_note_rows": judge_note_rows(campaigns=[row.campaign for row in rows]),
        # Which task and grader versions each campaign's figures come from (as run, or re-graded).
        "figure_versions": _figure_version_rows([row.campaign for row in [*harness_rows, *rows]]),
        "can_launch": can_edit,
        # Named only by the empty-table notice (core/_empty_scope.html): read only when it shows.
        "teams": [] if rows or harness_rows else list(teams_for(request.user)),
    }
    # The table is the same for every viewer of the same figures and filters: rendered once per
    # content digest (apps.dashboard.fragments); the score form carries this viewer's CSRF token.
    context["table_html"] = table = shared_fragment(
        request, "dashboard/leaderboard.html", "leaderboard-table", context, leave_out=("score_form",)
    )
    if request.htmx:
        return HttpResponse(table)
    return render(request, "dashboard/leaderboard.html", context)


def _band_groups(
    rows: list[figures.LeaderboardRow], *, grouped: bool
) -> list[tuple[figures.Band | None, list[figures.LeaderboardRow]]]:
    """Consecutive rows of one tied band together (sorted by the band's figure), else one group."""
    if not grouped:
        return [(None, rows)] if rows else []
    groups: list[tuple[figures.Band | None, list[figures.LeaderboardRow], int | None]] = []
    for row in rows:
        number = row.band.number if row.band else None
        if groups and groups[-1][2] == number:
            groups[-1][1].append(row)
        else:
            groups.append((row.band, [row], number))
    return [(band, members) for band, members, _ in groups]


def _correlations(
    rows: list[figures.LeaderboardRow], external: dict[int, dict[str, float]]
) -> tuple[list[str], dict[str, float | None]]:
    """Benchmarks users entered scores for, and each one's Spearman rank correlation with pass@1."""
    benchmarks = sorted({name for entry in external.values() for name in entry})
    correlations = {}
    for name in benchmarks:
        # spearman drops the pairs where either value is missing.
        ours = [row.figures.pass_at_1.value for row in rows]
        theirs = [external.get(row.campaign.pk, {}).get(name) for row in rows]
        correlations[name] = spearman(ours, theirs)  # type: ignore[arg-type]
    return benchmarks, correlations


@require_POST
@require_role(Role.OPERATOR)
def external_score_add(request):
    """Store (or replace) a published benchmark score for a visible campaign."""
    form = ExternalScoreForm(request.POST, campaigns=list(campaigns_visible_to(request.user)))
    if form.is_valid():
        services.external_score_save(actor=request.user, **form.cleaned_data)
    return redirect("dashboard:leaderboard")


@require_GET
@require_role(Role.VIEWER)
def gap(request):
    """pass@N against all-N per campaign, and pass^k curves for k = 1..N (as far as attempts ran) overall and per domain."""
    campaigns = figures.figure_campaigns(request.user, ids=_selected_ids(request), with_price_sheets=False)
    health = task_health_scope(request.GET, campaigns)
    tables = figures.per_task_tables(campaigns, exclude=health.exclude)
    figures.preload_campaign_figures(tables, campaigns, "figures", "curves")
    points, curves = [], {}
    for row in figures.campaign_rows(campaigns, tables):
        running = _running(row.figures.coverage)
        points.append(
            {
                "name": row.campaign.name,
                "pass_at_n": row.figures.pass_at_n_observed.value,
                "all_n": row.figures.all_n.value,
                "gap": row.figures.gap_pp.value,
                "colour": row.campaign.colour,
                "campaign": row.campaign,
                "running": running,
            }
        )
        if not running:  # no finished attempt: no point and no curve (zeros would read as results)
            curves[row.campaign] = figures.pass_hat_curves(tables, row.campaign)
    scatter = charts.gap_scatter(
        pd.DataFrame(
            [p for p in points if not p["running"]], columns=["name", "pass_at_n", "all_n", "colour"]
        )
    )
    colours = {campaign.name: campaign.colour for campaign in curves}
    overall = [
        {"series": campaign.name, "k": k, "value": value}
        for campaign, by in curves.items()
        for k, value in enumerate(by["all"], start=1)
    ]
    domain_names = sorted({name for by in curves.values() for name in by if name != "all"})
    per_domain = []
    for position, name in enumerate(domain_names):
        rows = [
            {"series": campaign.name, "k": k, "value": value}
            for campaign, by in curves.items()
            for k, value in enumerate(by.get(name, []), start=1)
        ]
        per_domain.append(
            {
                "domain": name,
                "id": f"chart-passk-{position}",
                "chart": chart(
                    charts.pass_hat_k_figure(
                        pd.DataFrame(rows, columns=["series", "k", "value"]),
                        title=f"pass^k · {name}",
                        colours=colours,
                    )
                ),
            }
        )
    context = {
        "points": points,
        "scatter": chart(scatter),
        "overall": chart(
            charts.pass_hat_k_figure(pd.DataFrame(overall, columns=["series", "k", "value"]), colours=colours)
        ),
        "per_domain": per_domain,
        # Without a selection the shown campaigns are every visible one: not read a second time.
        "all_campaigns": campaigns
        if _selected_ids(request) is None
        else figures.figure_campaigns(request.user, with_price_sheets=False),
        "selected": {c.pk for c in campaigns},
        "judge_note_rows": judge_note_rows(campaigns=campaigns),
        **health.context(),
    }
    return _render(request, "dashboard/gap.html", "gap-body", context)


def _running(coverage: figures.Coverage) -> str:
    """'running 0/36' for a campaign with no finished attempt (its figures would be zeros), else ''."""
    if coverage.done_attempts:
        return ""
    return f"running {coverage.done_attempts}/{coverage.planned_attempts}"


@require_http_methods(["GET", "POST"])
@require_role(Role.VIEWER)
def cost(request):
    """Cost per attempt, success and dependable task; tokens; overhead; price sheets; what-if prices.

    The what-if POST recomputes from stored token sums and renders a fragment; it never writes.
    """
    campaigns = figures.figure_campaigns(request.user)
    health = task_health_scope(request.GET, campaigns)
    rows = figures.campaign_rows(campaigns, figures.per_task_tables(campaigns, exclude=health.exclude))
    if request.method == "POST":
        return _whatif(request, campaigns, rows)
    table = pd.DataFrame(
        [
            {
                "name": row.campaign.name,
                "agent_cost": row.figures.cost.agent_cost,
                "eval_cost": row.figures.cost.eval_cost,
                **{
                    k: row.figures.cost.tokens.get(k, 0)
                    for k in ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens")
                },
            }
            for row in rows
            if row.figures.coverage.done_attempts
        ],
        columns=[
            "name",
            "agent_cost",
            "eval_cost",
            "input_tokens",
            "cached_input_tokens",
            "output_tokens",
            "reasoning_tokens",
        ],
    )
    sheets = {campaign.price_sheet_id: campaign.price_sheet for campaign in campaigns if campaign.price_sheet}
    context = {
        "rows": rows,
        "running": {row.campaign.pk: _running(row.figures.coverage) for row in rows},
        "cost_chart": chart(charts.cost_bars(table)),
        "token_chart": chart(charts.token_bars(table)),
        "sheets": list(sheets.values()),
        "whatif_form": WhatIfPriceForm(campaigns=campaigns),
        "judge_note_rows": judge_note_rows(campaigns=campaigns),
        **health.context(),
    }
    return render(request, "dashboard/cost.html", context)


def _whatif(request, campaigns, rows: list[figures.CampaignRow]):
    form = WhatIfPriceForm(request.POST, campaigns=campaigns)
    context: dict = {"whatif_form": form, "whatif": None}
    if form.is_valid():
        campaign = form.cleaned_data["campaign"]
        row = next(r for r in rows if r.campaign.pk == campaign.pk)
        context.update(whatif=figures.whatif_cost(row.figures, form.prices()), whatif_campaign=campaign)
    return render(request, "dashboard/cost.html#whatif-result", context)


@require_GET
@require_role(Role.VIEWER)
def domains(request):
    """Campaigns x domains heatmaps of pass@1, pass@N and all-N; per-domain deltas between two campaigns."""
    every = figures.figure_campaigns(request.user, with_price_sheets=False)
    health = task_health_scope(request.GET, every)
    tables = figures.per_task_tables(every, exclude=health.exclude)
    figures.preload_campaign_figures(tables, every, "figures", "domains")
    # A campaign with no finished attempt has no figures yet: named as running, left out of the
    # heatmaps, the ranks and the pair (its cells would be zeros that read as results).
    running = {c: _running(figures.campaign_figures(tables, c).coverage) for c in every}
    campaigns = [c for c in every if not running[c]]
    by_domain = {c.pk: {d.domain: d for d in figures.domain_figures(tables, c)} for c in campaigns}
    heatmaps = []
    for column, title in (
        ("pass_at_1", "pass@1"),
        ("pass_at_n", "pass@N observed"),
        ("all_n", "observed all-N"),
    ):
        grid = _domain_grid(campaigns, by_domain, column)
        heatmaps.append(
            {
                "title": title,
                "id": f"chart-heat-{column}",
                "chart": chart(charts.heatmap(grid, title=f"{title} by domain")),
            }
        )
    by_id = {c.pk: c for c in every}
    a, b = _pair(request, by_id)
    deltas, pair_error = [], ""
    unfinished = list(dict.fromkeys(c for c in (a, b) if c and running[c]))
    if unfinished:
        pair_error = " · ".join(
            f"{c.name} is {running[c]}: no finished attempt to compare yet" for c in unfinished
        )
    elif a and b:
        try:
            # The pair's own tables: a comparison not stored yet reads two campaigns' tables, not every one's.
            floors = figures.domain_comparisons(
                figures.per_task_tables([a, b] if a.pk != b.pk else [a], exclude=health.exclude),
                a,
                b,
                domains=sorted(set(by_domain[a.pk]) & set(by_domain[b.pk])),
            )
        except ValueError as exc:  # different N: all-N and its floor are not comparable
            floors, pair_error = {}, str(exc)
        for name in sorted(set(by_domain[a.pk]) & set(by_domain[b.pk])):
            in_a, in_b = by_domain[a.pk][name], by_domain[b.pk][name]
            deltas.append(
                {
                    "domain": name,
                    **{m: _delta_pp(in_a.share(m), in_b.share(m)) for m in figures.DOMAIN_METRICS},
                    "floor": floors.get(name),
                }
            )
    context = {
        "heatmaps": heatmaps,
        "rankings": figures.domain_rankings(campaigns, tables),
        "campaigns": every,
        "running": [(c, running[c]) for c in every if running[c]],
        "a": a,
        "b": b,
        "deltas": deltas,
        "judge_note_rows": judge_note_rows(campaigns=campaigns),
        "pair_error": pair_error,
        **health.context(),
    }
    return _render(request, "dashboard/domains.html", "domain-deltas", context)


def _domain_grid(
    campaigns, by_domain: dict[int, dict[str, figures.DomainFigures]], metric: str
) -> pd.DataFrame:
    """Campaigns (rows) x domains (columns, sorted) of one share; NaN where a campaign lacks the figure."""
    if not campaigns:
        return pd.DataFrame()
    domains = sorted({name for c in campaigns for name in by_domain[c.pk]})
    # One row of plain floats per campaign name (a later campaign of the same name replaces the row,
    # as a dict keyed by name does), one frame built at once: a pandas Series per campaign cost
    # more than the rest of a warm page at 100 campaigns.
    rows: dict[str, list[float | None]] = {}
    for c in campaigns:
        shares = by_domain[c.pk]
        # None (no figure, or a domain the campaign did not run) becomes NaN in the float frame.
        rows[c.name] = [shares[name].share(metric) if name in shares else None for name in domains]
    return pd.DataFrame.from_dict(rows, orient="index", columns=domains, dtype=float)


def _delta_pp(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else (a - b) * 100


def _pair(request, by_id: dict):
    """Campaigns ?a= and ?b= among the visible ones (None when absent or not visible)."""

    def pick(name):
        value = request.GET.get(name, "")
        return by_id.get(int(value)) if value.isdigit() else None

    return pick("a"), pick("b")


@require_GET
@require_role(Role.VIEWER)
def tasks(request):
    """Tasks x campaigns grid of c/N, filterable and paged; rows link to the task page."""
    campaigns = figures.figure_campaigns(request.user, ids=_selected_ids(request), with_price_sheets=False)
    kind = request.GET.get("filter", "")
    kind = kind if kind in figures.TASK_FILTERS else ""
    domain = request.GET.get("domain", "")
    rows, grid_version = figures.task_grid_versioned(campaigns, domain=domain, kind=kind)
    page = Paginator(rows, TASKS_PER_PAGE).get_page(request.GET.get("page"))
    domains_list, _ = figures.filter_options(campaigns)
    context = {
        "campaigns": campaigns,
        "page": page,
        # Rows carry the task's pk, not its validation (the per-task tables are cached): flag from here.
        "non_discriminating": set(
            Task.objects.filter(
                pk__in=[row.task_pk for row in page], validation=Task.Validation.NON_DISCRIMINATING
            ).values_list("pk", flat=True)
        ),
        "filter": kind,
        "filters": figures.TASK_FILTERS,
        "domain": domain,
        "domains": domains_list,
        "total": len(rows),
        "selected_ids": _selected_ids(request) or [],
        "page_query": urlencode(
            [("c", pk) for pk in _selected_ids(request) or []] + [("filter", kind), ("domain", domain)]
        ),
        # The page's rows stand in the fragment key as the grid's data version and the page number
        # (walking 50 rows x every campaign's cell would cost what rendering them costs).
        "grid_version": grid_version,
        "page_number": page.number,
    }
    context["grid_html"] = grid = shared_fragment(
        request, "dashboard/tasks.html", "task-grid", context, leave_out=("page",)
    )
    if request.htmx:
        return HttpResponse(grid)
    return render(request, "dashboard/tasks.html", context)


@require_GET
@require_role(Role.VIEWER)
def task_detail(request, pk: int):
    """One task: policy, initial-state patch, golden trajectory, validation, every attempt as a strip."""
    visible = campaigns_visible_to(request.user)
    task = (
        Task.objects.select_related("domain", "suite").filter(pk=pk, campaigns__in=visible).distinct().first()
    )
    if task is None:
        raise Http404("no such task in your campaigns")
    campaigns = figures.figure_campaigns(
        request.user, ids=visible.filter(tasks=task).values_list("pk", flat=True)
    )
    strips = figures.attempt_strip(task=task, campaigns=campaigns)
    context = {"task": task, "spec": task.spec, "strips": [(c, strips[c.pk]) for c in campaigns]}
    return render(request, "dashboard/task.html", context)


@require_GET
@require_role(Role.VIEWER)
def compare(request):
    """Paired comparison of two campaigns: a plain verdict, deltas with intervals and noise floors,
    the cost of each, and a sortable per-task table (optionally only the tasks where they differ)."""
    campaigns = figures.figure_campaigns(request.user, with_price_sheets=False)
    by_id = {c.pk: c for c in campaigns}
    a, b = _pair(request, by_id)
    result, error, costs, verdict, task_links = None, "", None, "", {}
    per_task: tuple[figures.TaskComparison, ...] = ()
    task_table_version: tuple = ()
    differences_only = request.GET.get("diff") == "1"
    health = task_health_scope(request.GET, [c for c in (a, b) if c])
    if a and b:
        tables = figures.per_task_tables([a, b] if a.pk != b.pk else [a], exclude=health.exclude)
        unfinished = [c for c in (a, b) if not figures.campaign_figures(tables, c).coverage.done_attempts]
        if unfinished:
            # No finished attempt: zeros with intervals would read as results, so say where it stands.
            error = " · ".join(
                f"{c.name} is running {cov.done_attempts}/{cov.planned_attempts}: no finished attempt to compare yet"
                for c in unfinished
                for cov in [figures.campaign_figures(tables, c).coverage]
            )
        else:
            try:
                result = figures.comparison(tables, a, b)
            except ValueError as exc:
                error = str(exc)
        if result is not None:
            costs = (figures.campaign_figures(tables, a).cost, figures.campaign_figures(tables, b).cost)
            verdict = compare_verdict(result, a=a.name, b=b.name, cost_a=costs[0], cost_b=costs[1])
            per_task = tuple(t for t in result.per_task if not differences_only or _differs(t))
            task_links = dict(
                Task.objects.filter(
                    suite_id=a.suite_id, task_id__in=[t.task_id for t in per_task]
                ).values_list("task_id", "pk")
            )
            task_table_version = (a.pk, b.pk, tables.stamp(a), tables.stamp(b), differences_only)
    # The per-task table (one row per shared task: 507 on ThinkingBox-Bench) rendered once per pair
    # and data version, shared by every viewer: its rows are a pure function of the pair's stamps.
    task_table_html = (
        shared_fragment(
            request,
            "dashboard/compare.html",
            "compare-tasks",
            {
                "per_task": per_task,
                "task_links": task_links,
                "differences_only": differences_only,
                "version": task_table_version,
            },
            leave_out=("per_task", "task_links"),
        )
        if result is not None
        else ""
    )
    context = {
        "task_table_html": task_table_html,
        "campaigns": campaigns,
        "a": a,
        "b": b,
        "result": result,
        "error": error,
        "judge_note_rows": judge_note_rows(campaigns=[c for c in (a, b) if c]) if result else [],
        "costs": costs,
        "verdict": verdict,
        "per_task": per_task,
        "task_links": task_links,
        "differences_only": differences_only,
        "robustness_sections": _robustness_sections(request.user, a, b),
        **health.context(),
    }
    return _render(request, "dashboard/compare.html", "compare-body", context)


def _robustness_sections(user, a: Campaign | None, b: Campaign | None) -> list[tuple[Campaign, Any]]:
    """The robustness section of each compared campaign run under a fault plan; when the other one is
    its paired clean campaign (same agent, tasks, seed, N, no plan), the Δ is taken against it."""
    sections = []
    for this, other in ((a, b), (b, a)):
        if this is None or (this is b and a is not None and a.pk == b.pk):
            continue
        robustness = campaign_robustness(campaign=this, user=user, clean=other)
        if robustness is not None:
            sections.append((this, robustness))
    return sections


def _differs(task: figures.TaskComparison) -> bool:
    """The two campaigns did not do equally well on the task (different success rate)."""
    return task.c_a * task.n_b != task.c_b * task.n_a


@require_GET
@require_role(Role.VIEWER)
def glossary(request):
    """Every figure the dashboard and the exports show, defined in plain words (anchors per term)."""
    return render(request, "dashboard/glossary.html", {"terms": figures.GLOSSARY})
