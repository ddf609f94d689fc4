"""Triage at scale over the API: failure clusters, the suspect-task queue and judge calibration (read-only).

Each answer is built by the same apps.triage selectors as the pages and the CSV/XLSX downloads, with
the same filters, so the numbers agree; only the user's teams' campaigns count.
"""

from __future__ import annotations

from django.http import QueryDict
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.api.base import ApiView, api_schema, id_field, paginated
from apps.api.views_catalog import PageFilter
from apps.figures.selectors import figure_campaigns
from apps.triage.selectors import (
    CATEGORIES,
    SCOPES,
    SUSPECT_KINDS,
    SUSPECT_STATUSES,
    QueueFilters,
    cluster_index,
    cluster_rows,
    judge_rows,
    suspect_tasks,
)

TAGS = ["triage"]


class ClusterFilter(PageFilter):
    campaign = serializers.ListField(
        child=id_field(),
        required=False,
        help_text="Campaign id (repeatable); default: every visible campaign.",
    )
    scope = serializers.ChoiceField(
        choices=list(SCOPES), required=False, help_text="clean (clean-looking failures, default) or failed."
    )
    domain = serializers.CharField(required=False, max_length=100)
    task = serializers.CharField(required=False, max_length=300, help_text="Stable task id.")
    category = serializers.ChoiceField(choices=list(CATEGORIES), required=False)


class ElementOutput(serializers.Serializer):
    kind = serializers.CharField(
        help_text="wrong_value, missing_effect, extra_effect, check_failed, rubric_failed…"
    )
    table = serializers.CharField(allow_blank=True, help_text="Table (diff items) or check kind.")
    target = serializers.CharField(help_text="Field, (row), what a check checks, or a rubric question.")
    tool = serializers.CharField(help_text="Tool that wrote it, or -.")
    phrase = serializers.CharField(allow_blank=True, help_text="In words, with the first example's values.")


class CountOutput(serializers.Serializer):
    name = serializers.CharField()
    attempts = serializers.IntegerField()


class ClusterOutput(serializers.Serializer):
    signature = serializers.CharField(
        source="cluster.signature",
        allow_blank=True,
        help_text="SPEC §8 signature digest (empty: not signed yet).",
    )
    attempts = serializers.IntegerField(source="cluster.size")
    clean_looking = serializers.IntegerField(source="cluster.clean")
    share = serializers.FloatField(allow_null=True, help_text="Share of the clean-looking failures in scope.")
    description = serializers.CharField(source="cluster.description")
    categories = serializers.ListField(child=serializers.CharField(), source="cluster.categories")
    elements = serializers.SerializerMethodField()
    tasks = serializers.IntegerField(source="cluster.tasks")
    campaigns = serializers.IntegerField(source="cluster.campaigns")
    models = serializers.IntegerField(source="cluster.models")
    top_tasks = serializers.SerializerMethodField()
    top_models = serializers.SerializerMethodField()
    termination = serializers.CharField(allow_blank=True, help_text="The most frequent termination.")
    termination_share = serializers.FloatField()
    examples = serializers.ListField(child=serializers.IntegerField(), source="cluster.examples")
    related = serializers.ListField(
        child=serializers.CharField(), source="cluster.related", help_text="Signatures one element apart."
    )
    reviewed = serializers.IntegerField()
    labelled = serializers.IntegerField()

    @extend_schema_field(ElementOutput(many=True))
    def get_elements(self, row) -> list[dict]:
        return [
            {
                "kind": item[0],
                "table": item[1],
                "target": item[2],
                "tool": item[3],
                "phrase": item[4] if len(item) > 4 else "",
            }
            for item in row.cluster.items
        ]

    @extend_schema_field(CountOutput(many=True))
    def get_top_tasks(self, row) -> list[dict]:
        return [{"name": name, "attempts": n} for name, n in row.top_tasks]

    @extend_schema_field(CountOutput(many=True))
    def get_top_models(self, row) -> list[dict]:
        return [{"name": name, "attempts": n} for name, n in row.top_models]


def _queue_filters(data: dict) -> QueueFilters:
    query = QueryDict(mutable=True)
    query.setlist("c", [str(pk) for pk in data.get("campaign") or []])
    for name in ("scope", "domain", "task", "category"):
        if data.get(name):
            query[name] = data[name]
    return QueueFilters.from_query(query)


class ClusterListView(ApiView):
    @api_schema(
        summary="Failure clusters of the triage queue (attempts grouped by SPEC §8 signature), largest first",
        tags=TAGS,
        parameters=[ClusterFilter],
        operation_id="triage_clusters_list",
        responses={200: paginated(ClusterOutput)},
    )
    def get(self, request):
        filters = _queue_filters(self.validated_query(ClusterFilter))
        index = cluster_index(user=request.user, filters=filters)
        return self.paginate(
            index,
            ClusterOutput,
            transform=lambda page: cluster_rows(user=request.user, filters=filters, index=index, page=page),
        )


class SuspectFilter(PageFilter):
    status = serializers.ChoiceField(
        choices=list(SUSPECT_STATUSES), required=False, help_text="Default open."
    )
    kind = serializers.ChoiceField(choices=list(SUSPECT_KINDS), required=False, help_text="Evidence kind.")


class EvidenceOutput(serializers.Serializer):
    kind = serializers.ChoiceField(choices=list(SUSPECT_KINDS))
    title = serializers.CharField()
    detail = serializers.CharField()
    attempt = serializers.IntegerField(source="attempt_id", allow_null=True, help_text="An example attempt.")
    value = serializers.FloatField(allow_null=True, help_text="e.g. the item-rest correlation.")


class DecisionOutput(serializers.Serializer):
    decision = serializers.CharField()
    note = serializers.CharField(allow_blank=True)
    decided_by = serializers.CharField(source="decided_by.username", allow_null=True, default=None)
    decided_at = serializers.DateTimeField()


class SuspectTaskOutput(serializers.Serializer):
    task = serializers.IntegerField(source="task.pk")
    task_id = serializers.CharField(source="task.task_id")
    domain = serializers.CharField(source="task.domain.name")
    status = serializers.ChoiceField(choices=["open", "excluded", "dismissed"])
    evidence = EvidenceOutput(many=True)
    decision = DecisionOutput(allow_null=True, help_text="The latest triager decision.")


class SuspectTaskListView(ApiView):
    @api_schema(
        summary="Suspect tasks (probably wrong tasks, not agents) with their evidence",
        tags=TAGS,
        parameters=[SuspectFilter],
        operation_id="triage_suspect_tasks_list",
        responses={200: paginated(SuspectTaskOutput)},
    )
    def get(self, request):
        data = self.validated_query(SuspectFilter)
        rows = suspect_tasks(
            campaigns=figure_campaigns(request.user),
            status=data.get("status", "open"),
            kind=data.get("kind", ""),
        )
        return self.paginate(rows, SuspectTaskOutput)


class ConfusionOutput(serializers.Serializer):
    tp = serializers.IntegerField(help_text="judge yes, human yes")
    fp = serializers.IntegerField(help_text="judge yes, human no")
    fn = serializers.IntegerField(help_text="judge no, human yes")
    tn = serializers.IntegerField(help_text="judge no, human no")


class JudgeOutput(serializers.Serializer):
    key = serializers.CharField(help_text="Judge version: SHA-256 of kind, model and prompt.")
    label = serializers.CharField(source="identity.label")  # type: ignore[assignment]  # DRF's metaclass moves declared fields out of the class: no clash with Field.label
    kind = serializers.CharField(source="identity.kind")
    model = serializers.CharField(source="identity.model", allow_blank=True)
    prompt = serializers.CharField(source="identity.prompt", allow_blank=True)
    campaigns = serializers.SerializerMethodField()
    labels = serializers.IntegerField(help_text="Human labels, on unjudged answers too.")
    unjudged = serializers.IntegerField(help_text="Labels on answers the judge could not give.")
    agreements = serializers.IntegerField(source="calibration.confusion.agreements")
    confusion = ConfusionOutput(source="calibration.confusion")
    tpr = serializers.FloatField(source="calibration.confusion.tpr", allow_null=True)
    tnr = serializers.FloatField(source="calibration.confusion.tnr", allow_null=True)
    kappa = serializers.FloatField(source="calibration.kappa", allow_null=True)
    kappa_lo = serializers.FloatField(source="calibration.kappa_lo", allow_null=True)
    kappa_hi = serializers.FloatField(source="calibration.kappa_hi", allow_null=True)
    calibrated = serializers.BooleanField(source="calibration.enough", help_text="At least 30 human labels.")
    note = serializers.CharField()

    def get_campaigns(self, row) -> list[int]:
        return [campaign.pk for campaign in row.campaigns]


class JudgeListView(ApiView):
    @api_schema(
        summary="Rubric judge versions and their agreement with human labels",
        tags=TAGS,
        parameters=[PageFilter],
        operation_id="triage_judges_list",
        responses={200: paginated(JudgeOutput)},
    )
    def get(self, request):
        self.validated_query(PageFilter)
        return self.paginate(judge_rows(campaigns=figure_campaigns(request.user)), JudgeOutput)
