"""Noise floor (SPEC §9), replicate sets, the attempts planner and the release gate.

The same selectors as the noise page, the planner page and `manage.py gate`, so the API answers
with the numbers the pages show and the verdicts the command prints.
"""

from __future__ import annotations

from dataclasses import asdict

from django.http import Http404, HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers
from rest_framework.response import Response

from apps.api.base import ApiView, api_schema, id_field, paginated
from apps.api.views_metrics import CampaignRefOutput, CampaignsFilter, healthy_field, per_campaign
from apps.campaigns.models import Campaign
from apps.figures import selectors as figures
from apps.figures.selectors import PerTaskTables, figure_campaigns
from apps.gates.selectors import GateInputError, gate_report, junit_xml
from tb_engine.metrics.planner import MODES

TAGS = ["noise floor"]


class MetricNoiseOutput(serializers.Serializer):
    metric = serializers.ChoiceField(choices=list(figures.NOISE_METRICS))
    label = serializers.CharField()  # type: ignore[assignment]  # DRF's metaclass moves declared fields out of the class: no clash with Field.label
    value = serializers.FloatField(allow_null=True, help_text="The campaign's figure over the scope (share).")
    se = serializers.FloatField(
        allow_null=True, help_text="Standard error: sd of 2000 task-bootstrap replicates."
    )
    rerun_se = serializers.FloatField(
        allow_null=True, help_text="SE of the difference to a rerun on the same tasks."
    )
    rerun_mdd = serializers.FloatField(
        allow_null=True,
        help_text="Rerun floor: (1.96 + 0.84) x rerun_se; smaller changes are run-to-run noise.",
    )
    tasks = serializers.IntegerField()


class CampaignNoiseOutput(serializers.Serializer):
    campaign = CampaignRefOutput()
    scopes = serializers.DictField(
        child=MetricNoiseOutput(many=True), help_text='"" = every task, then each domain by name.'
    )


class NoiseView(ApiView):
    @api_schema(
        summary="Noise floor per campaign, domain and figure: SE and the rerun floor (SPEC §9)",
        tags=TAGS,
        parameters=[CampaignsFilter],
        responses={200: paginated(CampaignNoiseOutput)},
        errors=(400, 401, 403),
    )
    def get(self, request):
        query = self.validated_query(CampaignsFilter)
        campaigns = figure_campaigns(request.user, ids=query.get("campaign") or None)

        def row(tables: PerTaskTables, campaign: Campaign) -> dict:
            return {"campaign": campaign, "scopes": figures.campaign_noise(tables, campaign).scopes}

        return self.paginate(campaigns, CampaignNoiseOutput, transform=per_campaign(row, query=query))


class ReplicateSpreadOutput(serializers.Serializer):
    metric = serializers.ChoiceField(choices=list(figures.NOISE_METRICS))
    label = serializers.CharField()  # type: ignore[assignment]  # DRF's metaclass moves declared fields out of the class: no clash with Field.label
    values = serializers.ListField(
        child=serializers.FloatField(allow_null=True), help_text="Per member, in order."
    )
    sd = serializers.FloatField(allow_null=True, help_text="Observed sd across the replicates (ddof 1).")
    range = serializers.FloatField(allow_null=True)
    max_abs_delta = serializers.FloatField(allow_null=True, help_text="Largest |Δ| between two replicates.")
    pairs = serializers.IntegerField()
    pairs_below_floor = serializers.IntegerField(help_text="Pairs whose |Δ| stays below their paired MDD.")
    median_pair_mdd = serializers.FloatField(allow_null=True)
    rerun_mdd = serializers.FloatField(allow_null=True, help_text="Rerun floor averaged over the members.")
    expected_sd = serializers.FloatField(
        allow_null=True, help_text="The sd the rerun floor implies for one replicate."
    )


class ReplicateSetOutput(serializers.Serializer):
    root = CampaignRefOutput(help_text="The set's first campaign.")
    members = CampaignRefOutput(many=True)
    complete = serializers.BooleanField(help_text="Every member finished.")
    spreads = ReplicateSpreadOutput(many=True)


class ReplicatesFilter(serializers.Serializer):
    healthy = healthy_field()
    page = id_field(required=False)
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=200)


class ReplicatesView(ApiView):
    @api_schema(
        summary="Replicate sets: observed run-to-run spread beside the noise floor",
        tags=TAGS,
        parameters=[ReplicatesFilter],
        responses={200: paginated(ReplicateSetOutput)},
        errors=(400, 401, 403),
    )
    def get(self, request):
        self.validated_query(ReplicatesFilter)
        return self.paginate(figures.replicate_sets(figure_campaigns(request.user)), ReplicateSetOutput)


class PlannerFilter(serializers.Serializer):
    campaign = serializers.ListField(
        child=id_field(),
        help_text="Campaigns to read variances from; the first is the pilot (design, prices).",
    )
    target_pp = serializers.FloatField(
        min_value=0.1, max_value=100, help_text="Difference in pass@1 to detect, pp."
    )
    mode = serializers.ChoiceField(
        choices=list(MODES),
        default="drift",
        help_text="drift: one configuration re-run (σ²_task = 0); ab: two configurations (σ²_task from pairs).",
    )


class PlanRowOutput(serializers.Serializer):
    attempts = serializers.IntegerField(help_text="N, attempts per task.")
    tasks_needed = serializers.IntegerField()
    feasible = serializers.BooleanField(help_text="The suite has that many tasks.")
    tasks_used = serializers.IntegerField()
    mdd_with_all_tasks = serializers.FloatField(
        help_text="MDD at this N with every task of the suite (share)."
    )
    attempts_per_campaign = serializers.IntegerField()
    cost_per_campaign = serializers.FloatField(
        allow_null=True, help_text="USD at the pilot's prices; null: unpriced."
    )


class PlanInputsOutput(serializers.Serializer):
    target = serializers.FloatField()
    mode = serializers.CharField()
    attempt_var = serializers.FloatField(allow_null=True)
    task_var = serializers.FloatField(allow_null=True)
    campaigns = serializers.IntegerField()
    pairs = serializers.IntegerField()
    tasks_available = serializers.IntegerField()
    cost_per_attempt = serializers.FloatField(allow_null=True)
    price_source = serializers.CharField(allow_blank=True)
    pilot_tasks = serializers.IntegerField()
    pilot_attempts = serializers.IntegerField()
    pilot_mdd = serializers.FloatField(allow_null=True)


class PlanOutput(serializers.Serializer):
    inputs = PlanInputsOutput()
    rows = PlanRowOutput(many=True)
    cheapest = PlanRowOutput(allow_null=True, help_text="Fewest attempts per campaign reaching the target.")
    problem = serializers.CharField(allow_blank=True, help_text="Why no plan could be made ('' otherwise).")


class PlannerView(ApiView):
    @api_schema(
        summary="Attempts planner: tasks x attempts that detect a pass@1 difference, and the cost",
        tags=TAGS,
        parameters=[PlannerFilter],
        responses={200: PlanOutput},
        errors=(400, 401, 403, 404),
    )
    def get(self, request):
        query = self.validated_query(PlannerFilter)
        ids = list(dict.fromkeys(query["campaign"]))
        by_id = {c.pk: c for c in figure_campaigns(request.user, ids=ids)}
        missing = [pk for pk in ids if pk not in by_id]
        if missing:
            raise Http404(f"no such campaign: {', '.join(map(str, missing))}")
        chosen = [by_id[pk] for pk in ids]
        plan = figures.attempts_plan(
            chosen,
            figures.per_task_tables(chosen),
            target=query["target_pp"] / 100.0,
            mode=query["mode"],
            tasks_available=figures.gradable_task_count(suite_id=chosen[0].suite_id),
        )
        return Response(PlanOutput(plan).data)


class GateInput(serializers.Serializer):
    campaign = id_field(help_text="The finished campaign to gate.")
    baseline = id_field(required=False, help_text="The campaign drops are measured from.")
    min_pass1 = serializers.FloatField(required=False, help_text="Minimum pass@1 (share 0..1).")
    min_all_n = serializers.FloatField(required=False, help_text="Minimum all-N share (0..1).")
    max_drop_pp = serializers.FloatField(
        required=False,
        help_text="Largest allowed drop from the baseline, pp; fails only when it clears the floor.",
    )
    domain = serializers.CharField(required=False, allow_blank=True, max_length=100, default="")
    format = serializers.ChoiceField(choices=["json", "junit"], default="json", help_text="junit: JUnit XML.")


class RuleOutput(serializers.Serializer):
    rule = serializers.CharField()
    metric = serializers.CharField()
    value = serializers.FloatField(allow_null=True, help_text="Share (min rules) or drop in pp (drop rules).")
    threshold = serializers.FloatField()
    lo = serializers.FloatField(allow_null=True)
    hi = serializers.FloatField(allow_null=True)
    mdd = serializers.FloatField(allow_null=True, help_text="Noise floor in pp (drop rules).")
    uses = serializers.CharField(help_text="What decides the verdict.")
    verdict = serializers.CharField(help_text="pass or fail.")
    detail = serializers.CharField()


class GateOutput(serializers.Serializer):
    passed = serializers.BooleanField()
    failures = serializers.IntegerField()
    campaign = CampaignRefOutput()
    baseline = CampaignRefOutput(allow_null=True)
    domain = serializers.CharField(allow_blank=True)
    tasks = serializers.IntegerField()
    shared_tasks = serializers.IntegerField(allow_null=True)
    rules = RuleOutput(many=True)


class GateView(ApiView):
    @api_schema(
        summary="Release gate: evaluate rules on a finished campaign (same as `manage.py gate`)",
        description="200 with passed true/false whatever the verdict (a failed gate is an answer, not an "
        "error); 400 when the gate cannot run. format=junit answers with JUnit XML.",
        tags=TAGS,
        request=GateInput,
        responses={
            (200, "application/json"): GateOutput,
            (200, "application/xml"): OpenApiResponse(
                OpenApiTypes.STR, description="JUnit XML (format=junit)"
            ),
        },
        errors=(400, 401, 403, 404),
    )
    def post(self, request):
        data = self.validated_body(GateInput)
        ids = [data["campaign"], *([data["baseline"]] if data.get("baseline") else [])]
        by_id = {c.pk: c for c in figure_campaigns(request.user, ids=ids)}
        for name in ("campaign", "baseline"):
            if data.get(name) and data[name] not in by_id:
                raise Http404(f"no such {name}")
        try:
            report = gate_report(
                campaign=by_id[data["campaign"]],
                baseline=by_id.get(baseline_id)
                if (baseline_id := data.get("baseline")) is not None
                else None,
                min_pass1=data.get("min_pass1"),
                min_all_n=data.get("min_all_n"),
                max_drop_pp=data.get("max_drop_pp"),
                domain=data["domain"],
            )
        except GateInputError as exc:
            raise serializers.ValidationError({"non_field_errors": [str(exc)]}) from exc
        if data["format"] == "junit":
            return HttpResponse(junit_xml(report), content_type="application/xml; charset=utf-8")
        body = {
            "passed": report.passed,
            "failures": report.failures,
            "campaign": report.campaign,
            "baseline": report.baseline,
            "domain": report.domain,
            "tasks": report.tasks,
            "shared_tasks": report.shared_tasks,
            "rules": [asdict(rule) for rule in report.rules],
        }
        return Response(GateOutput(body).data)
