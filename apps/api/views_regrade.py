"""Re-grades (issue 29): start a preview re-grade, read its impact report, apply it.

The same services and selectors as the /regrades/ pages and ``manage.py regrade``.
"""

from __future__ import annotations

from django.http import Http404
from rest_framework import serializers, status
from rest_framework.response import Response

from apps.api.base import ApiView, api_schema, id_field
from apps.api.errors import Conflict
from apps.campaigns.models import Campaign
from apps.core.access import teams_for
from apps.core.roles import Role
from apps.regrade.models import RegradeRun
from apps.regrade.selectors import campaign_rows, impact_report, runs_of
from apps.regrade.services import RegradeError, regrade_apply, regrade_preview

TAGS = ["re-grading"]


class RegradeInput(serializers.Serializer):
    campaigns = serializers.ListField(
        child=id_field(), min_length=1, max_length=1000, help_text="Campaign ids, all of one team."
    )


class FlipOutput(serializers.Serializer):
    attempt_id = serializers.IntegerField()
    campaign = serializers.CharField()
    task_id = serializers.CharField()
    before = serializers.CharField()
    after = serializers.CharField()
    kind = serializers.CharField()


class RegradeOutput(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.CharField()
    grader_version = serializers.CharField()
    created_at = serializers.DateTimeField()
    applied_at = serializers.DateTimeField(allow_null=True)
    regraded = serializers.IntegerField()
    changed = serializers.IntegerField(help_text="Attempts whose grading (verdict, diff, checks…) changes.")
    not_regradable = serializers.IntegerField()
    not_regradable_reasons = serializers.DictField(child=serializers.IntegerField())
    flip_counts = serializers.DictField(child=serializers.IntegerField())
    campaigns = serializers.ListField(
        child=serializers.DictField(),
        help_text="pass@1, all-N, cost per dependable task before/after/Δ, ranks.",
    )
    reversals = serializers.ListField(child=serializers.ListField(child=serializers.CharField()))
    flips = FlipOutput(many=True)
    task_versions = serializers.DictField(child=serializers.DictField())


def _payload(run: RegradeRun) -> dict:
    report = impact_report(run)
    return {
        "id": run.pk,
        "status": run.status,
        "grader_version": run.grader_version,
        "created_at": run.created_at,
        "applied_at": run.applied_at,
        "regraded": report["regraded"],
        "changed": report["changed"],
        "not_regradable": report["not_regradable"],
        "not_regradable_reasons": report["not_regradable_reasons"],
        "flip_counts": report["flip_counts"],
        "campaigns": campaign_rows(report),
        "reversals": [list(pair) for pair in report["reversals"]],
        "flips": report["flips"],
        "task_versions": run.task_versions,
    }


def _run_for(user, pk: int) -> RegradeRun:
    run = RegradeRun.objects.filter(pk=pk, team__in=teams_for(user)).first()
    if run is None:
        raise Http404("no such re-grade")
    return run


class RegradeListView(ApiView):
    roles = {"GET": Role.VIEWER, "POST": Role.OPERATOR}

    @api_schema(
        summary="Re-grades visible to you, newest first",
        tags=TAGS,
        responses={200: RegradeOutput(many=True)},
        errors=(401, 403),
    )
    def get(self, request):
        runs = runs_of(team_ids=list(teams_for(request.user).values_list("pk", flat=True)))
        return Response(RegradeOutput([_payload(run) for run in runs], many=True).data)

    @api_schema(
        summary="Re-grade campaigns' stored attempts as a preview (operator): the impact report",
        tags=TAGS,
        request=RegradeInput,
        responses={201: RegradeOutput},
        errors=(400, 401, 403),
    )
    def post(self, request):
        ids = self.validated_body(RegradeInput)["campaigns"]
        campaigns = list(Campaign.objects.filter(pk__in=ids, team__in=teams_for(request.user)))
        teams = {c.team_id for c in campaigns}
        if len(campaigns) != len(set(ids)) or len(teams) != 1:
            raise serializers.ValidationError({"campaigns": "campaigns you can see, all of one team"})
        run = regrade_preview(campaign_ids=[c.pk for c in campaigns], team_id=teams.pop(), user=request.user)
        return Response(RegradeOutput(_payload(run)).data, status=status.HTTP_201_CREATED)


class RegradeDetailView(ApiView):
    @api_schema(summary="A re-grade's impact report", tags=TAGS, responses={200: RegradeOutput})
    def get(self, request, pk: int):
        return Response(RegradeOutput(_payload(_run_for(request.user, pk))).data)


class RegradeApplyView(ApiView):
    roles = {"POST": Role.OPERATOR}

    @api_schema(
        summary="Apply a preview re-grade (operator): its verdicts become the figures'",
        tags=TAGS,
        request=None,
        responses={200: RegradeOutput},
        errors=(401, 403, 404, 409),
    )
    def post(self, request, pk: int):
        run = _run_for(request.user, pk)
        try:
            run = regrade_apply(run=run, user=request.user)
        except RegradeError as exc:
            raise Conflict(str(exc)) from exc
        return Response(RegradeOutput(_payload(run)).data)
