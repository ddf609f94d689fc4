"""SPEC §5 figures over the campaigns a user may see: leaderboard, gap, cost, domains, compare.

Every figure comes from the figures app's selectors (same per-task tables, same cache, same
fixed bootstrap seed) that the pages call, so the API and the pages show the same numbers.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import Http404
from rest_framework import serializers
from rest_framework.response import Response

from apps.api.base import ApiView, api_schema, id_field, paginated
from apps.campaigns.models import Campaign
from apps.figures import selectors as figures
from apps.figures.selectors import PerTaskTables, figure_campaigns
from apps.triage.selectors import task_health_scope

TAGS = ["metrics"]


class CampaignRefOutput(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    name = serializers.CharField()
    agent_name = serializers.CharField(source="agent.name")
    is_simulation = serializers.BooleanField(source="agent.is_simulation", help_text="Not a model.")
    is_harness_check = serializers.BooleanField(
        source="agent.is_harness_check", help_text="Golden replay or a harness check: tests the grader."
    )
    agent_label = serializers.CharField(
        source="agent.badge_text", help_text="'harness check, not a model', 'simulation, not a model' or ''."
    )
    n_attempts = serializers.IntegerField(help_text="N, attempts planned per task.")


class EstimateOutput(serializers.Serializer):
    value = serializers.FloatField(
        allow_null=True, help_text="Point estimate (share 0..1); null when no task is eligible."
    )
    lo = serializers.FloatField(allow_null=True, help_text="95% task-bootstrap interval, fixed seed.")
    hi = serializers.FloatField(allow_null=True)
    tasks = serializers.IntegerField(help_text="Tasks the estimate averages over.")
    excluded = serializers.ListField(
        child=serializers.CharField(), help_text="Tasks without enough done attempts."
    )


class AllNOutput(EstimateOutput):
    count = serializers.IntegerField(help_text="Tasks with c = n = N (dependable).")


class IntervalOutput(serializers.Serializer):
    value = serializers.FloatField(allow_null=True)
    lo = serializers.FloatField(allow_null=True)
    hi = serializers.FloatField(allow_null=True)


class CoverageOutput(serializers.Serializer):
    tasks = serializers.IntegerField()
    complete_tasks = serializers.IntegerField()
    incomplete_tasks = serializers.ListField(child=serializers.CharField())
    done_attempts = serializers.IntegerField()
    planned_attempts = serializers.IntegerField()
    missing_attempts = serializers.IntegerField()
    infra_errors = serializers.IntegerField()
    unjudged = serializers.IntegerField(
        help_text="Done attempts with a rubric the judge could not answer: excluded like infra errors."
    )


class CostOutput(serializers.Serializer):
    agent_cost = serializers.FloatField(allow_null=True, help_text="USD.")
    eval_cost = serializers.FloatField(allow_null=True, help_text="User simulator + judge, USD.")
    billed_attempts = serializers.IntegerField()
    successes = serializers.IntegerField()
    cost_per_attempt = serializers.FloatField(allow_null=True)
    cost_per_success = serializers.FloatField(allow_null=True)
    cost_per_dependable_task = serializers.FloatField(
        allow_null=True, help_text="null when no task is dependable."
    )
    eval_cost_per_attempt = serializers.FloatField(allow_null=True)
    tokens = serializers.DictField(child=serializers.IntegerField())


class FiguresOutput(serializers.Serializer):
    n_attempts = serializers.IntegerField()
    ks = serializers.ListField(child=serializers.IntegerField())
    seed = serializers.IntegerField()
    coverage = CoverageOutput()
    pass_at_1 = EstimateOutput()
    pass_at_k = serializers.DictField(child=EstimateOutput(), help_text="k -> unbiased pass@k.")
    pass_hat_k = serializers.DictField(child=EstimateOutput(), help_text="k -> unbiased pass^k.")
    pass_hat_k_plugin = serializers.DictField(
        child=serializers.FloatField(allow_null=True),
        help_text="k -> plug-in (c/n)^k, as ThinkingBox's tb agg prints it.",
    )
    pass_at_n_observed = EstimateOutput()
    all_n = AllNOutput()
    gap_pp = IntervalOutput(help_text="pass@N observed - all-N share, percentage points.")
    cost = CostOutput()
    mean_tokens = serializers.FloatField(
        allow_null=True, help_text="Input + output tokens per billed attempt."
    )
    unpriced = serializers.IntegerField(help_text="Attempts on a model the price sheet does not list.")


class BandOutput(serializers.Serializer):
    metric = serializers.ChoiceField(
        choices=list(figures.NOISE_METRICS), help_text="The figure the bands rank by (set by `sort`)."
    )
    number = serializers.IntegerField(help_text="1 = the best band.")
    rank = serializers.IntegerField(help_text="League rank: 1 + campaigns in better bands.")
    shared = serializers.BooleanField(help_text="Tied with other campaigns (shown as '=rank').")
    size = serializers.IntegerField(help_text="Campaigns in the band.")
    leader = serializers.CharField(help_text="The campaign that opened the band.")
    delta_to_leader = serializers.FloatField(
        allow_null=True, help_text="This campaign minus the leader (share); null for the leader."
    )
    mdd_to_leader = serializers.FloatField(
        allow_null=True,
        help_text="Minimum detectable difference of that pair: (1.96 + 0.84) x SE(Δ), paired task bootstrap.",
    )


class LeaderboardRowOutput(serializers.Serializer):
    campaign = CampaignRefOutput()
    figures = FiguresOutput()
    reversed_with = serializers.ListField(
        child=serializers.CharField(), help_text="Campaigns ordered the other way by all-N."
    )
    band = BandOutput(
        allow_null=True,
        help_text="Tied band (SPEC §9): differences below the noise floor are ties; null without a value.",
    )
    se = serializers.DictField(
        child=serializers.FloatField(allow_null=True),
        help_text="Standard error per noise figure over the slice (pass_at_1, pass_hat_5, pass_hat_n, all_n).",
    )


def healthy_field():
    return serializers.ChoiceField(
        choices=["exclude"],
        required=False,
        help_text="exclude: leave out tasks with open health issues (triage labels grader bug, task ambiguous).",
    )


class LeaderboardFilter(serializers.Serializer):
    domain = serializers.CharField(required=False, allow_blank=True, max_length=100)
    tag = serializers.CharField(required=False, allow_blank=True, max_length=100)
    sort = serializers.ChoiceField(choices=sorted(figures.LEADERBOARD_SORTS), default="pass1")
    dir = serializers.ChoiceField(choices=["asc", "desc"], required=False)
    healthy = healthy_field()
    page = id_field(required=False)
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=200)


class CampaignsFilter(serializers.Serializer):
    campaign = serializers.ListField(
        child=id_field(),
        required=False,
        help_text="Only these campaigns (repeat the parameter); default every visible one.",
    )
    healthy = healthy_field()
    page = id_field(required=False)
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=200)


class LeaderboardView(ApiView):
    @api_schema(
        summary="Leaderboard: every SPEC §5 figure per campaign over a task slice",
        tags=TAGS,
        description="With domain and/or tag, only campaigns that ran at least one task of that slice are listed.",
        parameters=[LeaderboardFilter],
        responses={200: paginated(LeaderboardRowOutput)},
        errors=(400, 401, 403, 404),
    )
    def get(self, request):
        query = self.validated_query(LeaderboardFilter)
        campaigns = figure_campaigns(request.user)
        domain, tag = query.get("domain", ""), query.get("tag", "")
        if domain or tag:
            tables = figures.per_task_tables(campaigns)
            campaigns = figures.campaigns_with_tasks_in(campaigns, tables, domain=domain, tag=tag)
        sort = query["sort"]
        descending = query.get("dir", "asc" if sort == "name" else "desc") == "desc"
        rows = figures.leaderboard_rows(
            campaigns,
            domain=domain,
            tag=tag,
            exclude=task_health_scope(query, campaigns).exclude,
            rank_by=figures.rank_metric(sort),
        )
        return self.paginate(figures.sort_rows(rows, key=sort, descending=descending), LeaderboardRowOutput)


def _selected_campaigns(user, query: dict) -> list[Campaign]:
    return figure_campaigns(user, ids=query.get("campaign") or None)


def per_campaign(
    row: Callable[[PerTaskTables, Campaign], dict], *, query: dict
) -> Callable[[list[Campaign]], list[dict]]:
    """A page transform: one table load for the page (health toggle applied), then `row(tables, campaign)` per campaign."""

    def rows(page: list[Campaign]) -> list[dict]:
        tables = figures.per_task_tables(page, exclude=task_health_scope(query, page).exclude)
        return [row(tables, campaign) for campaign in page]

    return rows


class GapRowOutput(serializers.Serializer):
    campaign = CampaignRefOutput()
    pass_at_n_observed = serializers.FloatField(allow_null=True)
    all_n = serializers.FloatField(allow_null=True)
    gap_pp = IntervalOutput()
    pass_hat_curves = serializers.DictField(
        child=serializers.ListField(child=serializers.FloatField(allow_null=True)),
        help_text='"all" and each domain -> unbiased pass^k for k = 1..min(N, most done attempts of a task).',
    )


class GapView(ApiView):
    @api_schema(
        summary="Discovery-reliability gap and pass^k curves per campaign",
        tags=TAGS,
        parameters=[CampaignsFilter],
        responses={200: paginated(GapRowOutput)},
        errors=(400, 401, 403, 404),
    )
    def get(self, request):
        query = self.validated_query(CampaignsFilter)
        campaigns = _selected_campaigns(request.user, query)

        def row(tables: PerTaskTables, campaign: Campaign) -> dict:
            m = figures.campaign_figures(tables, campaign)
            return {
                "campaign": campaign,
                "pass_at_n_observed": m.pass_at_n_observed.value,
                "all_n": m.all_n.value,
                "gap_pp": m.gap_pp,
                "pass_hat_curves": figures.pass_hat_curves(tables, campaign),
            }

        return self.paginate(campaigns, GapRowOutput, transform=per_campaign(row, query=query))


class PriceSheetRefOutput(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    name = serializers.CharField()
    source = serializers.CharField()  # type: ignore[assignment]  # DRF's metaclass moves declared fields out of the class: no clash with Field.source
    effective_date = serializers.DateField()


class CostRowOutput(serializers.Serializer):
    campaign = CampaignRefOutput()
    price_sheet = PriceSheetRefOutput(
        allow_null=True, help_text="Source and date of the prices; null when unpriced."
    )
    cost = CostOutput()
    mean_tokens = serializers.FloatField(allow_null=True)
    eval_tokens = serializers.IntegerField(help_text="Tokens of the user simulator and judge.")
    unpriced = serializers.IntegerField()


class CostView(ApiView):
    @api_schema(
        summary="Cost per attempt, success and dependable task, with the price sheet used",
        tags=TAGS,
        parameters=[CampaignsFilter],
        responses={200: paginated(CostRowOutput)},
        errors=(400, 401, 403, 404),
    )
    def get(self, request):
        query = self.validated_query(CampaignsFilter)
        campaigns = _selected_campaigns(request.user, query)

        def row(tables: PerTaskTables, campaign: Campaign) -> dict:
            m = figures.campaign_figures(tables, campaign)
            return {
                "campaign": campaign,
                "price_sheet": campaign.price_sheet,
                "cost": m.cost,
                "mean_tokens": m.mean_tokens,
                "eval_tokens": m.eval_tokens,
                "unpriced": m.unpriced,
            }

        return self.paginate(campaigns, CostRowOutput, transform=per_campaign(row, query=query))


class DomainFiguresOutput(serializers.Serializer):
    domain = serializers.CharField()
    tasks = serializers.IntegerField()
    pass_at_1 = serializers.FloatField(allow_null=True)
    pass_at_n = serializers.FloatField(
        allow_null=True, help_text="pass@N observed: share of tasks solved at least once."
    )
    all_n = serializers.FloatField(allow_null=True, help_text="Share of tasks solved in all N attempts.")


class DomainsRowOutput(serializers.Serializer):
    campaign = CampaignRefOutput()
    domains = DomainFiguresOutput(many=True)


class DomainsView(ApiView):
    @api_schema(
        summary="Per-domain pass@1, pass@N observed and all-N share per campaign",
        tags=TAGS,
        parameters=[CampaignsFilter],
        responses={200: paginated(DomainsRowOutput)},
        errors=(400, 401, 403, 404),
    )
    def get(self, request):
        query = self.validated_query(CampaignsFilter)
        campaigns = _selected_campaigns(request.user, query)

        def row(tables: PerTaskTables, campaign: Campaign) -> dict:
            return {"campaign": campaign, "domains": figures.domain_figures(tables, campaign)}

        return self.paginate(campaigns, DomainsRowOutput, transform=per_campaign(row, query=query))


class CompareFilter(serializers.Serializer):
    a = id_field(help_text="Campaign A (the figures are A minus B).")
    b = id_field(help_text="Campaign B; same N as A.")
    healthy = healthy_field()


class PairOutput(serializers.Serializer):
    a = serializers.FloatField(allow_null=True)
    b = serializers.FloatField(allow_null=True)


class PerTaskComparisonOutput(serializers.Serializer):
    task_id = serializers.CharField()
    n_a = serializers.IntegerField()
    c_a = serializers.IntegerField()
    n_b = serializers.IntegerField()
    c_b = serializers.IntegerField()
    delta_pass_at_1 = serializers.FloatField(allow_null=True)
    dependable_a = serializers.BooleanField()
    dependable_b = serializers.BooleanField()
    p_a_better = serializers.FloatField(help_text="P(p_A > p_B) under Beta(1 + c, 1 + n - c) posteriors.")


class DeltaOutput(IntervalOutput):
    se = serializers.FloatField(
        allow_null=True, help_text="SE(Δ): sd of the paired task-bootstrap replicates."
    )
    mdd = serializers.FloatField(
        allow_null=True, help_text="Noise floor: (1.96 + 0.84) x SE(Δ) (α = 0.05 two-sided, power 0.8)."
    )
    clears = serializers.BooleanField(
        allow_null=True, help_text="|Δ| > 0 and |Δ| >= MDD: a real difference; false: tied."
    )


class ComparisonOutput(serializers.Serializer):
    a = CampaignRefOutput()
    b = CampaignRefOutput()
    tasks = serializers.IntegerField(help_text="Shared tasks compared.")
    only_in_a = serializers.ListField(child=serializers.CharField())
    only_in_b = serializers.ListField(child=serializers.CharField())
    delta_pass_at_1 = DeltaOutput(help_text="Paired task bootstrap, 95%, with its noise floor.")
    delta_all_n = DeltaOutput()
    pass_at_1 = PairOutput()
    pass_at_n_observed = PairOutput()
    gained = serializers.ListField(child=serializers.CharField(), help_text="Dependable in A only.")
    lost = serializers.ListField(child=serializers.CharField(), help_text="Dependable in B only.")
    sharpening = serializers.BooleanField(help_text="pass@1 up while pass@N observed down.")
    per_task = PerTaskComparisonOutput(many=True)


class CompareView(ApiView):
    @api_schema(
        summary="Paired comparison of two campaigns on their shared tasks",
        tags=TAGS,
        parameters=[CompareFilter],
        responses={200: ComparisonOutput},
        errors=(400, 401, 403, 404),
    )
    def get(self, request):
        query = self.validated_query(CompareFilter)
        by_id = {c.pk: c for c in figure_campaigns(request.user, ids=[query["a"], query["b"]])}
        missing = [name for name in ("a", "b") if query[name] not in by_id]
        if missing:
            raise Http404(f"no such campaign: {', '.join(missing)}")
        a, b = by_id[query["a"]], by_id[query["b"]]
        tables = figures.per_task_tables(
            [a, b] if a.pk != b.pk else [a], exclude=task_health_scope(query, [a, b]).exclude
        )
        try:
            result = figures.comparison(tables, a, b)
        except ValueError as exc:  # different N: all-N is not comparable
            raise serializers.ValidationError({"b": [str(exc)]}) from exc
        keys = [key for key in ComparisonOutput().fields.keys() if key not in ("a", "b")]
        return Response(
            ComparisonOutput({"a": a, "b": b, **{key: getattr(result, key) for key in keys}}).data
        )
