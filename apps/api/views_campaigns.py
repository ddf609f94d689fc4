"""Campaigns: list and read (viewer), create, launch, cancel, resume (operator), live progress.

Every lookup goes through campaigns_visible_to, so another team's campaign is a 404 for
everyone but admins. Writes call the campaigns app's services, exactly as the launch page does.
"""

from __future__ import annotations

from django.conf import settings
from django.db.models import Count, Q
from django.http import Http404
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers, status
from rest_framework.response import Response

from apps.adaptive.selectors import calibrations_visible_to
from apps.agents.models import AgentConfig, PriceSheet
from apps.agents.services import UnknownAgent, agent_config_for
from apps.api.base import ApiView, api_schema, id_field, paginated
from apps.api.errors import Conflict
from apps.attempts.selectors.process_risk import campaign_process_risk
from apps.campaigns.models import Campaign
from apps.campaigns.selectors import (
    campaign_live,
    campaign_progress,
    campaign_robustness,
    campaigns_visible_to,
)
from apps.campaigns.services import (
    EvaluatorConfigError,
    NotReplicable,
    campaign_cancel,
    campaign_create,
    campaign_replicate,
    campaign_resume,
    campaign_start,
    evaluator_configs,
    fault_plan_normalised,
)
from apps.core.access import teams_for
from apps.core.roles import Role
from apps.suites.models import Suite, Task
from tb_engine.faults import FaultPlanError

TAGS = ["campaigns"]


class CampaignOutput(serializers.ModelSerializer):
    team = serializers.IntegerField(source="team_id", read_only=True)
    team_name = serializers.CharField(source="team.name", read_only=True)
    owner = serializers.CharField(source="owner.username", read_only=True)
    agent = serializers.IntegerField(source="agent_id", read_only=True)
    agent_name = serializers.CharField(source="agent.name", read_only=True)
    is_simulation = serializers.BooleanField(
        source="agent.is_simulation",
        read_only=True,
        help_text="Golden, harness-check or simulated agent: not a model.",
    )
    is_harness_check = serializers.BooleanField(
        source="agent.is_harness_check",
        read_only=True,
        help_text="Golden replay or a harness check (do-nothing, skip-last-write, changed-argument): tests the grader.",
    )
    suite = serializers.IntegerField(source="suite_id", read_only=True)
    price_sheet = serializers.IntegerField(source="price_sheet_id", read_only=True, allow_null=True)
    replicate_of = serializers.IntegerField(
        source="replicate_of_id",
        read_only=True,
        allow_null=True,
        help_text="The first campaign of this campaign's replicate set (null: not a replicate).",
    )
    task_count = serializers.IntegerField(read_only=True)
    user_simulator = serializers.DictField(read_only=True)
    judge = serializers.DictField(read_only=True)
    adaptive = serializers.BooleanField(
        read_only=True, help_text="An adaptive campaign: its full figures are estimated, never observed."
    )
    adaptive_options = serializers.DictField(read_only=True)
    exclude_non_discriminating = serializers.BooleanField(
        read_only=True, help_text="Created with the option that leaves non-discriminating tasks out."
    )
    non_discriminating_excluded = serializers.IntegerField(
        read_only=True, help_text="How many non-discriminating tasks that option left out."
    )
    non_discriminating_included = serializers.IntegerField(
        source="non_discriminating_count",
        read_only=True,
        help_text="The campaign's tasks whose latest validation says non-discriminating (run and flagged).",
    )
    non_discriminating = serializers.SerializerMethodField(
        help_text='What its figures state, e.g. "includes 1 non-discriminating task" or '
        '"non-discriminating tasks excluded (1)".'
    )
    window = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="Attempts queued or running at once (null: the server's default, TB_CAMPAIGN_DEFAULT_WINDOW).",
    )
    fault_plan = serializers.DictField(
        read_only=True,
        help_text="The fault plan every attempt ran under, normalised ({} = none; docs/faults.md).",
    )

    class Meta:
        model = Campaign
        fields = [
            "id",
            "name",
            "status",
            "team",
            "team_name",
            "owner",
            "agent",
            "agent_name",
            "is_simulation",
            "is_harness_check",
            "suite",
            "suite_version",
            "suite_hash",
            "harness_version",
            "task_count",
            "n_attempts",
            "window",
            "seed",
            "fault_plan",
            "user_simulator",
            "judge",
            "price_sheet",
            "replicate_of",
            "adaptive",
            "adaptive_options",
            "exclude_non_discriminating",
            "non_discriminating_excluded",
            "non_discriminating_included",
            "non_discriminating",
            "created_at",
            "started_at",
            "finished_at",
        ]

    def get_non_discriminating(self, campaign: Campaign) -> str:
        # An annotation of visible_campaigns, where every campaign this serializer is given comes from.
        included: int = campaign.non_discriminating_count  # type: ignore[attr-defined]
        return campaign.non_discriminating_statement(included=included)


class CampaignFilter(serializers.Serializer):
    status = serializers.ChoiceField(choices=Campaign.Status.choices, required=False)
    team = id_field(required=False)
    agent = id_field(required=False)
    suite = id_field(required=False)
    page = id_field(required=False)
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=200)


class AdaptiveInput(serializers.Serializer):
    calibration = serializers.IntegerField(
        required=False,
        allow_null=True,
        help_text="Calibration id of the suite; default the latest for the team.",
    )
    budget_share = serializers.FloatField(required=False, min_value=0.01, max_value=1.0)
    target_se = serializers.FloatField(required=False, min_value=0.0, max_value=0.5)
    min_attempts = serializers.IntegerField(required=False, min_value=1, max_value=200)
    batch_tasks = serializers.IntegerField(required=False, min_value=1, max_value=1000)


class CampaignInput(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    team = id_field(help_text="One of your teams.")
    agent = serializers.PrimaryKeyRelatedField(
        queryset=AgentConfig.objects.all(),
        required=False,
        help_text="An agent configuration (or agent_spec).",
    )
    agent_spec = serializers.CharField(
        max_length=200,
        required=False,
        help_text="Instead of agent: golden, sim:<persona> or a harness check (check:do-nothing, "
        "check:skip-last-write, check:changed-argument), created on first use.",
    )
    user_simulator = serializers.DictField(
        required=False,
        help_text='{"kind": "scripted"} (default) or {"kind": "llm", "model", "base_url", "api_key_env", '
        '"prompt"}; the prompt needs {query}, {user_context} and {stop_token}. api_key_env names an '
        "environment variable on the workers, never a key.",
    )
    judge = serializers.DictField(
        required=False,
        help_text='{"kind": "keyword"} (default) or {"kind": "llm", "model", "base_url", "api_key_env", '
        '"prompt"}: temperature 0, strict yes/no parsing. A rubric the judge cannot answer is unjudged '
        "(never a failure; excluded from the figures like an infra error).",
    )
    suite = serializers.PrimaryKeyRelatedField(queryset=Suite.objects.all())
    task_ids = serializers.ListField(
        child=serializers.CharField(max_length=300),
        required=False,
        help_text="Stable task ids of the suite; default every gradable (not invalid) task (or every task of "
        "`domains`).",
    )
    domains = serializers.ListField(child=serializers.CharField(max_length=100), required=False)
    exclude_non_discriminating = serializers.BooleanField(
        default=False,
        help_text="Leave out tasks a do-nothing attempt passes (suite validation); by default they run "
        "and are flagged. The campaign records the choice (`non_discriminating`).",
    )
    n_attempts = serializers.IntegerField(min_value=1, max_value=200, default=20)
    window = serializers.IntegerField(
        min_value=1,
        required=False,
        allow_null=True,
        help_text="Attempts queued or running at once (default TB_CAMPAIGN_DEFAULT_WINDOW, at most "
        "TB_CAMPAIGN_MAX_WINDOW). Requests to the model are capped by the agent's max_concurrency.",
    )
    seed = serializers.IntegerField(default=0, min_value=-(2**63), max_value=2**63 - 1)
    price_sheet = serializers.PrimaryKeyRelatedField(
        queryset=PriceSheet.objects.all(), required=False, allow_null=True
    )
    launch = serializers.BooleanField(
        default=False, help_text="Start at once (same as POST …/launch/ afterwards)."
    )
    adaptive = AdaptiveInput(
        required=False,
        allow_null=True,
        help_text="Make it an adaptive campaign: a fraction of the attempts, figures estimated (docs/adaptive.md).",
    )
    fault_plan = serializers.DictField(
        required=False,
        allow_null=True,
        help_text='Run every attempt under a fault plan, e.g. {"kinds": ["error_after_commit"], "at_calls": [0], '
        '"tools": "writes", "seed": 1} or {"kinds": [...], "rate": 0.2}. Kinds: error_before_commit, '
        "error_after_commit, timeout_after_commit, duplicate_delivery, slow_reply, read_failure; tools: writes, "
        "reads, all, named (with tool_names). docs/faults.md.",
    )

    def validate_fault_plan(self, value: dict | None) -> dict:
        # The message names the plan's bad field ("kinds: unknown gremlins", "rate: must be between…").
        try:
            return fault_plan_normalised(value)
        except FaultPlanError as exc:
            raise serializers.ValidationError(str(exc).removeprefix("fault plan: ")) from exc

    def to_internal_value(self, data):
        missing = {}
        if isinstance(data, dict) and "agent" not in data and "agent_spec" not in data:
            missing["agent"] = ["This field is required (or give agent_spec)."]
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            detail = exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
            raise serializers.ValidationError({**detail, **missing}) from exc
        if missing:
            raise serializers.ValidationError(missing)
        return value

    def validate_team(self, value: int):
        team = teams_for(self.context["request"].user).filter(pk=value).first()
        if team is None:
            raise serializers.ValidationError("not one of your teams")
        return team

    def validate_window(self, value: int | None) -> int | None:
        if value is not None and value > settings.CAMPAIGN_MAX_WINDOW:
            raise serializers.ValidationError(
                f"at most {settings.CAMPAIGN_MAX_WINDOW} (TB_CAMPAIGN_MAX_WINDOW)"
            )
        return value

    def validate(self, data: dict) -> dict:
        suite_team = data["suite"].team_id
        if suite_team is not None and suite_team != data["team"].pk:
            raise serializers.ValidationError({"suite": ["not a suite of this team"]})
        if ("agent" in data) == ("agent_spec" in data):
            raise serializers.ValidationError({"agent": ["give exactly one of agent and agent_spec"]})
        agent_team = data["agent"].team_id if "agent" in data else None
        if agent_team is not None and agent_team != data["team"].pk:
            visible = teams_for(self.context["request"].user).filter(pk=agent_team).exists()
            problem = "not an agent of this team" if visible else "Invalid pk - object does not exist."
            raise serializers.ValidationError({"agent": [problem]})
        if "agent_spec" in data:
            try:
                data["agent"] = agent_config_for(data.pop("agent_spec"))
            except UnknownAgent as exc:
                raise serializers.ValidationError({"agent_spec": [str(exc)]}) from exc
        try:
            data["user_simulator"], data["judge"] = evaluator_configs(
                user=data.get("user_simulator"), judge=data.get("judge")
            )
        except EvaluatorConfigError as exc:
            field = "user_simulator" if str(exc).startswith("user simulator") else "judge"
            raise serializers.ValidationError({field: [str(exc)]}) from exc
        tasks = data["suite"].tasks.all()
        if data.get("domains"):
            tasks = tasks.filter(domain__name__in=data["domains"])
        if data.get("task_ids"):
            wanted = set(data["task_ids"])
            tasks = list(tasks.filter(task_id__in=wanted))
            unknown = sorted(wanted - {task.task_id for task in tasks})
            if unknown:
                raise serializers.ValidationError(
                    {"task_ids": [f"not in suite {data['suite'].name}: {', '.join(unknown[:10])}"]}
                )
        data["tasks"] = list(tasks)
        adaptive = data.get("adaptive")
        if adaptive is not None and adaptive.get("calibration") is not None:
            known = calibrations_visible_to(self.context["request"].user, suite=data["suite"]).filter(
                pk=adaptive["calibration"], team=data["team"]
            )
            if not known.exists():
                raise serializers.ValidationError(
                    {"adaptive": {"calibration": ["not a calibration of this suite for the team"]}}
                )
        return data


def visible_campaigns(user):
    return campaigns_visible_to(user).annotate(
        task_count=Count("tasks", distinct=True),
        non_discriminating_count=Count(
            "tasks", filter=Q(tasks__validation=Task.Validation.NON_DISCRIMINATING), distinct=True
        ),
    )


def get_campaign_for_user(user, pk: int) -> Campaign:
    """The campaign if the user's teams may see it; 404 otherwise (outsiders learn nothing)."""
    campaign = visible_campaigns(user).filter(pk=pk).first()
    if campaign is None:
        raise Http404("no such campaign")
    return campaign


class CampaignListView(ApiView):
    roles = {"POST": Role.OPERATOR}

    @api_schema(
        summary="List campaigns your teams may see",
        operation_id="campaigns_list",
        tags=TAGS,
        parameters=[CampaignFilter],
        responses={200: paginated(CampaignOutput)},
    )
    def get(self, request):
        query = self.validated_query(CampaignFilter)
        campaigns = visible_campaigns(request.user).order_by("-created_at", "-pk")
        for field in ("status", "team", "agent", "suite"):
            if field in query:
                campaigns = campaigns.filter(**{field: query[field]})
        return self.paginate(campaigns, CampaignOutput)

    @api_schema(
        summary="Create a campaign (operator), optionally launching it",
        tags=TAGS,
        request=CampaignInput,
        responses={201: CampaignOutput},
        errors=(400, 401, 403),
    )
    def post(self, request):
        data = self.validated_body(CampaignInput)
        try:
            campaign = campaign_create(
                name=data["name"],
                team=data["team"],
                owner=request.user,
                agent=data["agent"],
                suite=data["suite"],
                tasks=data["tasks"],
                n_attempts=data["n_attempts"],
                seed=data["seed"],
                user_simulator=data["user_simulator"],
                judge=data["judge"],
                price_sheet=data.get("price_sheet"),
                adaptive=dict(data["adaptive"]) if data.get("adaptive") is not None else None,
                exclude_non_discriminating=data["exclude_non_discriminating"],
                window=data.get("window"),
                fault_plan=data.get("fault_plan") or None,
            )
        except ValueError as exc:  # e.g. no gradable task selected, an adaptive option out of range
            field = (
                "adaptive"
                if str(exc).startswith(("adaptive", "budget", "target", "min_attempts"))
                else "task_ids"
            )
            raise serializers.ValidationError({field: [str(exc)]}) from exc
        if data["launch"]:
            campaign_start(campaign=campaign)
        return Response(
            CampaignOutput(get_campaign_for_user(request.user, campaign.pk)).data,
            status=status.HTTP_201_CREATED,
        )


class LiveEndpointOutput(serializers.Serializer):
    """An endpoint the campaign calls; its figures are null without Redis (embedded broker)."""

    endpoint = serializers.CharField(help_text="The endpoint's normalised base URL.")
    roles = serializers.ListField(child=serializers.CharField(), help_text="agent, user simulator, judge")
    cap = serializers.IntegerField(allow_null=True, help_text="Requests in flight across all workers.")
    in_flight = serializers.IntegerField(required=False, allow_null=True)
    waiting = serializers.IntegerField(
        required=False, allow_null=True, help_text="Requests waiting for a slot or a 429 pause."
    )
    paused_s = serializers.FloatField(
        required=False, allow_null=True, help_text="What is left of a 429 pause."
    )
    calls = serializers.IntegerField(required=False, allow_null=True)
    # The metaclass takes declared fields off the class, so this never hides Serializer.errors.
    errors = serializers.IntegerField(required=False, allow_null=True)  # type: ignore[assignment]
    rate_limited = serializers.IntegerField(required=False, allow_null=True)
    error_rate = serializers.FloatField(required=False, allow_null=True)
    rate_limited_rate = serializers.FloatField(required=False, allow_null=True)
    latency_p50_ms = serializers.FloatField(required=False, allow_null=True)
    latency_p95_ms = serializers.FloatField(required=False, allow_null=True)
    minutes = serializers.IntegerField(
        required=False, allow_null=True, help_text="The window of the calls and rates."
    )


class LiveOutput(serializers.Serializer):
    in_flight = serializers.IntegerField(help_text="Attempts running now.")
    remaining = serializers.IntegerField(help_text="Attempts queued or running.")
    endpoint_figures = serializers.ChoiceField(
        choices=["live", "embedded", "unavailable", "none"],
        help_text="embedded: no Redis (embedded broker), so no endpoint figures; none: no model endpoint.",
    )
    ended_recently = serializers.IntegerField()
    pace_window_s = serializers.FloatField()
    mean_attempt_s = serializers.FloatField(allow_null=True)
    eta_seconds = serializers.FloatField(allow_null=True)
    eta_basis = serializers.CharField(allow_blank=True)
    endpoints = LiveEndpointOutput(many=True)


class ProcessRiskKindOutput(serializers.Serializer):
    count = serializers.IntegerField(help_text="Passing attempts with at least one finding of this kind.")
    share = serializers.FloatField(
        allow_null=True, help_text="Of the passing attempts (null without a pass)."
    )


class ProcessRiskOutput(serializers.Serializer):
    passed = serializers.IntegerField(help_text="Passing attempts of the campaign.")
    with_risk = serializers.IntegerField(
        help_text="Passing attempts with process findings (passed with process risk)."
    )
    share = serializers.FloatField(allow_null=True, help_text="with_risk / passed (null without a pass).")
    kinds = serializers.DictField(
        child=ProcessRiskKindOutput(),
        help_text="write_reverted, outside_footprint, write_before_required_step (docs/process_risk.md).",
    )


class CampaignDetailOutput(CampaignOutput):
    live = serializers.SerializerMethodField(
        help_text="While the campaign runs: attempts in flight, its endpoints' load and an ETA (else null)."
    )
    process_risk = serializers.SerializerMethodField(
        help_text="Passed with process risk: passing attempts whose process findings the verdict cannot see."
    )

    class Meta(CampaignOutput.Meta):
        fields = [*CampaignOutput.Meta.fields, "live", "process_risk"]

    @extend_schema_field(ProcessRiskOutput)
    def get_process_risk(self, campaign: Campaign) -> dict:
        risk = campaign_process_risk(campaign_ids=[campaign.pk])[campaign.pk]
        return {"passed": risk.passed, "with_risk": risk.with_risk, "share": risk.share, "kinds": risk.kinds}

    @extend_schema_field(LiveOutput(allow_null=True))
    def get_live(self, campaign: Campaign) -> dict | None:
        if not campaign.is_active:
            return None
        live = campaign_live(campaign=campaign, progress=campaign_progress(campaign=campaign))
        return LiveOutput(live.to_dict()).data


class CampaignDetailView(ApiView):
    @api_schema(
        summary="One campaign (with its live figures while it runs)",
        tags=TAGS,
        responses={200: CampaignDetailOutput},
        errors=(401, 403, 404),
    )
    def get(self, request, pk: int):
        return Response(CampaignDetailOutput(get_campaign_for_user(request.user, pk)).data)


class ProgressOutput(serializers.Serializer):
    status = serializers.ChoiceField(choices=Campaign.Status.choices)
    total = serializers.IntegerField()
    queued = serializers.IntegerField()
    running = serializers.IntegerField()
    done = serializers.IntegerField()
    infra_error = serializers.IntegerField()
    cancelled = serializers.IntegerField()
    passed = serializers.IntegerField()
    unjudged = serializers.IntegerField(
        help_text="Done, but a rubric the judge could not answer: excluded from pass_rate, never a failure."
    )
    finished = serializers.IntegerField()
    percent = serializers.FloatField()
    pass_rate = serializers.FloatField(
        allow_null=True, help_text="Passes among done and judged attempts so far."
    )
    throughput_per_min = serializers.FloatField(help_text="Attempts finished over the last minute.")
    eta_seconds = serializers.FloatField(allow_null=True)


def progress_data(campaign: Campaign) -> dict:
    progress = campaign_progress(campaign=campaign)
    fields = (
        "total",
        "queued",
        "running",
        "done",
        "infra_error",
        "cancelled",
        "passed",
        "unjudged",
        "finished",
        "percent",
        "pass_rate",
        "throughput_per_min",
        "eta_seconds",
    )
    return {"status": campaign.status, **{name: getattr(progress, name) for name in fields}}


class CampaignProgressView(ApiView):
    @api_schema(
        summary="Status and progress of a campaign",
        tags=TAGS,
        responses={200: ProgressOutput},
        errors=(401, 403, 404),
    )
    def get(self, request, pk: int):
        return Response(ProgressOutput(progress_data(get_campaign_for_user(request.user, pk))).data)


class RobustnessKindOutput(serializers.Serializer):
    kind = serializers.CharField()
    fired = serializers.IntegerField(help_text="Graded attempts in which this kind fired.")
    recovered = serializers.IntegerField(help_text="Of them, attempts that still passed.")
    recovery_rate = serializers.FloatField(allow_null=True)
    recovery_lo = serializers.FloatField(allow_null=True, help_text="95% Wilson interval, low end.")
    recovery_hi = serializers.FloatField(allow_null=True)
    duplicate_effects = serializers.IntegerField(
        help_text="Attempts whose diff holds an extra effect attributed to this kind's faulted call or its retry."
    )


class RobustnessOutput(serializers.Serializer):
    fault_plan = serializers.DictField(help_text="The plan every attempt ran under (docs/faults.md).")
    kinds = RobustnessKindOutput(many=True, help_text="One per fault kind that fired.")
    figures = serializers.DictField(
        help_text="tb_engine.metrics.faults.fault_figures: graded, none_fired (planned, not fired: counted "
        "apart), unfired_ordinals, pass_at_1, all_n, duplicate_effect {count, of, rate, lo, hi}, per kind."
    )
    clean_campaign = serializers.IntegerField(
        allow_null=True,
        help_text="The paired clean campaign (same agent, suite, tasks, seed and N; no plan).",
    )
    delta = serializers.DictField(
        allow_null=True,
        help_text="Faulted minus clean on shared tasks: {tasks, pass_at_1: {faulted, clean, delta, mdd, clears}, "
        "all_n: {…}}; mdd is the paired noise floor.",
    )


class CampaignRobustnessView(ApiView):
    @api_schema(
        summary="Robustness under the campaign's fault plan (per fault kind, duplicate effects, Δ vs clean)",
        tags=TAGS,
        responses={200: RobustnessOutput},
        errors=(401, 403, 404),
    )
    def get(self, request, pk: int):
        campaign = get_campaign_for_user(request.user, pk)
        robustness = campaign_robustness(campaign=campaign, user=request.user)
        if robustness is None:
            raise Http404("this campaign ran without a fault plan")
        return Response(
            RobustnessOutput(
                {
                    "fault_plan": robustness.plan,
                    "kinds": robustness.rows,
                    "figures": robustness.figures,
                    "clean_campaign": robustness.clean.pk if robustness.clean else None,
                    "delta": robustness.delta,
                }
            ).data
        )


class ActionOutput(serializers.Serializer):
    campaign = CampaignOutput()
    attempts = serializers.IntegerField(
        help_text="Attempts created (launch), cancelled (cancel) or re-queued (resume)."
    )


class _CampaignAction(ApiView):
    """POST to a campaign: check the state, call the service, answer with the campaign and a count."""

    roles = {"POST": Role.OPERATOR}
    allowed_from: tuple[str, ...] = ()
    verb = ""

    def act(self, campaign: Campaign) -> int:
        raise NotImplementedError

    def post(self, request, pk: int):
        campaign = get_campaign_for_user(request.user, pk)
        if campaign.status not in self.allowed_from:
            allowed = ", ".join(self.allowed_from)
            raise Conflict(f"cannot {self.verb} a campaign that is {campaign.status} (only when {allowed})")
        count = self.act(campaign)
        campaign = get_campaign_for_user(request.user, pk)
        return Response(ActionOutput({"campaign": campaign, "attempts": count}).data)


def _action_schema(summary: str):
    return api_schema(
        summary=summary, tags=TAGS, request=None, responses={200: ActionOutput}, errors=(401, 403, 404, 409)
    )


class CampaignLaunchView(_CampaignAction):
    allowed_from = (Campaign.Status.DRAFT,)
    verb = "launch"

    def act(self, campaign: Campaign) -> int:
        return campaign_start(campaign=campaign)

    @_action_schema("Launch a draft campaign (operator): create its attempts and dispatch them")
    def post(self, request, pk: int):
        return super().post(request, pk)


class CampaignCancelView(_CampaignAction):
    allowed_from = (Campaign.Status.DRAFT, Campaign.Status.RUNNING)
    verb = "cancel"

    def act(self, campaign: Campaign) -> int:
        return campaign_cancel(campaign=campaign)

    @_action_schema("Cancel a campaign (operator): queued attempts are cancelled, running ones end cancelled")
    def post(self, request, pk: int):
        return super().post(request, pk)


class CampaignResumeView(_CampaignAction):
    allowed_from = (Campaign.Status.CANCELLED, Campaign.Status.DONE)
    verb = "resume"

    def act(self, campaign: Campaign) -> int:
        return campaign_resume(campaign=campaign)

    @_action_schema("Resume a campaign (operator): re-queue cancelled and infra-error attempts")
    def post(self, request, pk: int):
        return super().post(request, pk)


class ReplicateInput(serializers.Serializer):
    seed = serializers.IntegerField(
        required=False,
        min_value=-(2**63),
        max_value=2**63 - 1,
        help_text="Default: one above the set's highest.",
    )
    name = serializers.CharField(
        max_length=200, required=False, help_text="Default: '<first> · replicate <k>'."
    )
    launch = serializers.BooleanField(default=True, help_text="Start at once.")


class CampaignReplicateView(ApiView):
    roles = {"POST": Role.OPERATOR}

    @api_schema(
        summary="Re-run a campaign's configuration as a replicate with a new seed (operator)",
        description="Same agent, tasks, N, user simulator, judge and price sheet; the new campaign's "
        "replicate_of is the set's first campaign. Replicate sets show the observed run-to-run spread "
        "beside the noise floor (GET /api/metrics/replicates/).",
        tags=TAGS,
        request=ReplicateInput,
        responses={201: CampaignOutput},
        errors=(400, 401, 403, 404, 409),
    )
    def post(self, request, pk: int):
        campaign = get_campaign_for_user(request.user, pk)
        data = self.validated_body(ReplicateInput)
        if campaign.is_active:
            raise Conflict("cannot replicate a running campaign: wait until it finishes")
        try:
            replicate = campaign_replicate(
                campaign=campaign,
                owner=request.user,
                seed=data.get("seed"),
                name=data.get("name", ""),
                start=data["launch"],
            )
        except NotReplicable as exc:
            raise Conflict(str(exc)) from exc
        except ValueError as exc:
            raise serializers.ValidationError({"seed": [str(exc)]}) from exc
        return Response(
            CampaignOutput(get_campaign_for_user(request.user, replicate.pk)).data,
            status=status.HTTP_201_CREATED,
        )
