"""Drift watches: list and read (viewer), create, change, delete and run now (operator), runs with their
comparisons, acknowledge an alert (triager), make a run the baseline (operator).

Lookups go through the drift app's watches_visible_to, so another team's watch is a 404.
"""

from __future__ import annotations

from django.http import Http404
from rest_framework import serializers, status
from rest_framework.response import Response

from apps.agents.models import AgentConfig
from apps.api.base import ApiView, api_schema, id_field, paginated
from apps.api.errors import Conflict
from apps.campaigns.selectors import campaigns_visible_to
from apps.core.access import teams_for
from apps.core.roles import Role
from apps.drift import services
from apps.drift.models import Watch, WatchRun
from apps.drift.selectors import run_view, watches_visible_to
from apps.suites.models import Suite

TAGS = ["drift"]


class WatchOutput(serializers.ModelSerializer):
    team = serializers.IntegerField(source="team_id", read_only=True)
    owner = serializers.CharField(source="owner.username", read_only=True)
    agent = serializers.IntegerField(source="agent_id", read_only=True)
    agent_name = serializers.CharField(source="agent.name", read_only=True)
    suite = serializers.IntegerField(source="suite_id", read_only=True)
    task_ids = serializers.SerializerMethodField(help_text="Chosen task ids; empty: the whole suite.")
    baseline = serializers.IntegerField(source="baseline_id", read_only=True, allow_null=True)
    schedule = serializers.CharField(source="schedule_text", read_only=True)
    last_probe = serializers.DictField(read_only=True, help_text="Last endpoint identity seen, or {error}.")

    class Meta:
        model = Watch
        fields = [
            "id",
            "name",
            "team",
            "owner",
            "agent",
            "agent_name",
            "suite",
            "task_ids",
            "n_attempts",
            "interval_minutes",
            "cron",
            "schedule",
            "baseline",
            "probe_minutes",
            "webhook",
            "enabled",
            "next_run_at",
            "pending_trigger",
            "last_probe_at",
            "last_probe",
            "created_at",
        ]

    def get_task_ids(self, watch: Watch) -> list[str]:
        return sorted(task.task_id for task in watch.tasks.all())


class WatchInput(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    team = id_field(help_text="One of your teams.")
    agent = serializers.PrimaryKeyRelatedField(queryset=AgentConfig.objects.all())
    suite = serializers.PrimaryKeyRelatedField(queryset=Suite.objects.all())
    task_ids = serializers.ListField(
        child=serializers.CharField(max_length=300), required=False, help_text="Default: the whole suite."
    )
    n_attempts = serializers.IntegerField(min_value=1, max_value=200, default=5)
    interval_minutes = serializers.IntegerField(min_value=1, required=False, allow_null=True)
    cron = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    baseline = id_field(
        required=False, allow_null=True, help_text="A finished campaign; default: the first run."
    )
    probe_minutes = serializers.IntegerField(min_value=0, default=60)
    webhook = serializers.BooleanField(default=True)
    enabled = serializers.BooleanField(default=True)

    def validate_team(self, value: int):
        team = teams_for(self.context["request"].user).filter(pk=value).first()
        if team is None:
            raise serializers.ValidationError("not one of your teams")
        return team

    def validate_baseline(self, value):
        if value is None:
            return None
        campaign = campaigns_visible_to(self.context["request"].user).filter(pk=value).first()
        if campaign is None:
            raise serializers.ValidationError("no such campaign among those your teams may see")
        return campaign

    def validate(self, data: dict) -> dict:
        if data.get("task_ids"):
            wanted = set(data["task_ids"])
            tasks = list(data["suite"].tasks.filter(task_id__in=wanted))
            unknown = sorted(wanted - {task.task_id for task in tasks})
            if unknown:
                raise serializers.ValidationError(
                    {"task_ids": [f"not in the suite: {', '.join(unknown[:10])}"]}
                )
            data["tasks"] = tasks
        return data


class WatchUpdateInput(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False)
    interval_minutes = serializers.IntegerField(min_value=1, required=False, allow_null=True)
    cron = serializers.CharField(max_length=100, required=False, allow_blank=True)
    baseline = id_field(required=False, allow_null=True)
    probe_minutes = serializers.IntegerField(min_value=0, required=False)
    webhook = serializers.BooleanField(required=False)
    enabled = serializers.BooleanField(required=False)

    validate_baseline = WatchInput.validate_baseline


def _watch_or_404(user, pk: int) -> Watch:
    watch = watches_visible_to(user).prefetch_related("tasks").filter(pk=pk).first()
    if watch is None:
        raise Http404("no such watch")
    return watch


def _invalid(exc: Exception) -> serializers.ValidationError:
    message = str(exc)
    field = message.split(":", 1)[0] if ":" in message else "non_field_errors"
    known = set(WatchInput().fields) | {"interval_minutes"}
    return serializers.ValidationError({field if field in known else "non_field_errors": [message]})


class WatchListView(ApiView):
    roles = {"POST": Role.OPERATOR}

    @api_schema(
        summary="Drift watches your teams may see",
        operation_id="watches_list",
        tags=TAGS,
        responses={200: paginated(WatchOutput)},
    )
    def get(self, request):
        return self.paginate(watches_visible_to(request.user).prefetch_related("tasks"), WatchOutput)

    @api_schema(
        summary="Create a drift watch (operator); its first run starts on the next tick",
        tags=TAGS,
        request=WatchInput,
        responses={201: WatchOutput},
        errors=(400, 401, 403),
    )
    def post(self, request):
        data = self.validated_body(WatchInput)
        try:
            watch = services.watch_create(
                name=data["name"],
                team=data["team"],
                owner=request.user,
                agent=data["agent"],
                suite=data["suite"],
                tasks=data.get("tasks"),
                n_attempts=data["n_attempts"],
                interval_minutes=data.get("interval_minutes"),
                cron=data.get("cron") or "",
                baseline=data.get("baseline"),
                probe_minutes=data["probe_minutes"],
                webhook=data["webhook"],
                enabled=data["enabled"],
            )
        except (services.WatchInputError, services.ScheduleError) as exc:
            raise _invalid(exc) from exc
        return Response(
            WatchOutput(_watch_or_404(request.user, watch.pk)).data, status=status.HTTP_201_CREATED
        )


class WatchDetailView(ApiView):
    roles = {"PATCH": Role.OPERATOR, "DELETE": Role.OPERATOR}

    @api_schema(summary="One drift watch", tags=TAGS, responses={200: WatchOutput}, errors=(401, 403, 404))
    def get(self, request, pk: int):
        return Response(WatchOutput(_watch_or_404(request.user, pk)).data)

    @api_schema(
        summary="Change a watch's schedule, baseline, probe, webhook, name or enabled flag (operator)",
        tags=TAGS,
        request=WatchUpdateInput,
        responses={200: WatchOutput},
        errors=(400, 401, 403, 404),
    )
    def patch(self, request, pk: int):
        watch = _watch_or_404(request.user, pk)
        changes = self.validated_body(WatchUpdateInput)
        try:
            services.watch_update(watch=watch, changes=changes)
        except (services.WatchInputError, services.ScheduleError) as exc:
            raise _invalid(exc) from exc
        return Response(WatchOutput(_watch_or_404(request.user, pk)).data)

    @api_schema(
        summary="Delete a watch and its run records (operator); the runs' campaigns stay",
        tags=TAGS,
        responses={204: None},
        errors=(401, 403, 404),
    )
    def delete(self, request, pk: int):
        services.watch_delete(watch=_watch_or_404(request.user, pk))
        return Response(status=status.HTTP_204_NO_CONTENT)


class DeltaViewOutput(serializers.Serializer):
    value = serializers.FloatField(allow_null=True, help_text="Run minus the other campaign (share).")
    lo = serializers.FloatField(allow_null=True)
    hi = serializers.FloatField(allow_null=True)
    mdd = serializers.FloatField(allow_null=True, help_text="Noise floor of the pair.")
    clears = serializers.BooleanField(allow_null=True)


class ComparedOutput(serializers.Serializer):
    campaign_id = serializers.IntegerField()
    campaign = serializers.CharField()
    tasks = serializers.IntegerField(help_text="Shared tasks compared.")
    pass_at_1 = DeltaViewOutput()
    all_n = DeltaViewOutput()
    levels = serializers.DictField(child=serializers.DictField(child=serializers.FloatField(allow_null=True)))
    became_dependable = serializers.ListField(child=serializers.CharField())
    stopped_being_dependable = serializers.ListField(child=serializers.CharField())


class ProviderOutput(serializers.Serializer):
    model = serializers.CharField(allow_null=True)
    system_fingerprint = serializers.CharField(allow_null=True)
    headers = serializers.DictField(child=serializers.CharField())
    attempts = serializers.IntegerField()


class RunOutput(serializers.Serializer):
    id = serializers.IntegerField(source="run.pk")
    number = serializers.IntegerField(source="run.number")
    campaign = serializers.IntegerField(source="run.campaign_id")
    trigger = serializers.ChoiceField(source="run.trigger", choices=Watch.Trigger.choices)
    status = serializers.ChoiceField(source="run.status", choices=WatchRun.Status.choices)
    started_at = serializers.DateTimeField(source="run.started_at")
    evaluated_at = serializers.DateTimeField(source="run.evaluated_at", allow_null=True)
    provider = ProviderOutput(source="run.provider", many=True)
    provider_changed = serializers.BooleanField(source="run.provider_changed", help_text="A boundary.")
    figures = serializers.DictField(help_text="pass_at_1 / all_n {value, lo, hi}, tasks, attempts.")
    vs_baseline = ComparedOutput(allow_null=True)
    vs_previous = ComparedOutput(allow_null=True)
    alert = serializers.BooleanField(source="run.alert")
    alert_reasons = serializers.ListField(source="run.alert_reasons", child=serializers.CharField())
    acknowledged_at = serializers.DateTimeField(source="run.acknowledged_at", allow_null=True)
    webhook_status = serializers.CharField(source="run.webhook_status", allow_blank=True)
    notes = serializers.ListField(child=serializers.CharField())


class WatchRunsView(ApiView):
    @api_schema(
        summary="A watch's runs, oldest first, with Δ vs baseline and previous run, flips and alerts",
        tags=TAGS,
        responses={200: paginated(RunOutput)},
        errors=(401, 403, 404),
    )
    def get(self, request, pk: int):
        watch = _watch_or_404(request.user, pk)
        runs = watch.runs.select_related("campaign").order_by("number")
        return self.paginate(runs, RunOutput, transform=lambda page: [run_view(run) for run in page])


class WatchRunNowView(ApiView):
    roles = {"POST": Role.OPERATOR}

    @api_schema(
        summary="Start a run now (operator)",
        tags=TAGS,
        request=None,
        responses={201: RunOutput},
        errors=(401, 403, 404, 409),
    )
    def post(self, request, pk: int):
        watch = _watch_or_404(request.user, pk)
        try:
            run = services.watch_run_now(watch=watch)
        except services.WatchBusy as exc:
            raise Conflict(str(exc)) from exc
        return Response(RunOutput(run_view(run)).data, status=status.HTTP_201_CREATED)


def _run_or_404(user, pk: int) -> WatchRun:
    run = (
        WatchRun.objects.select_related("watch", "campaign")
        .filter(pk=pk, watch__in=watches_visible_to(user))
        .first()
    )
    if run is None:
        raise Http404("no such run")
    return run


class RunAcknowledgeView(ApiView):
    roles = {"POST": Role.TRIAGER}

    @api_schema(
        summary="Acknowledge a run's alert (triager)",
        tags=TAGS,
        request=None,
        responses={200: RunOutput},
        errors=(401, 403, 404),
    )
    def post(self, request, pk: int):
        run = services.run_acknowledge(run=_run_or_404(request.user, pk), user=request.user)
        return Response(RunOutput(run_view(run)).data)


class RunBaselineView(ApiView):
    roles = {"POST": Role.OPERATOR}

    @api_schema(
        summary="Compare the watch's later runs with this run (operator)",
        tags=TAGS,
        request=None,
        responses={200: WatchOutput},
        errors=(401, 403, 404, 409),
    )
    def post(self, request, pk: int):
        run = _run_or_404(request.user, pk)
        if run.status != WatchRun.Status.DONE:
            raise Conflict("only an evaluated run can become the baseline")
        watch = services.run_make_baseline(run=run)
        return Response(WatchOutput(_watch_or_404(request.user, watch.pk)).data)
