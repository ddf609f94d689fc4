"""Suites and tasks (read-only, viewer role). Suites are shared across teams: any viewer reads them."""

from __future__ import annotations

from django.db.models import Count
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers
from rest_framework.response import Response

from apps.api.base import ApiView, api_schema, paginated
from apps.suites.models import Domain, Suite, Task
from apps.suites.selectors import suites_visible_to, tasks_visible_to

TAGS = ["suites"]


class DomainOutput(serializers.ModelSerializer):
    class Meta:
        model = Domain
        fields = ["id", "name", "title", "backend"]


class SuiteOutput(serializers.ModelSerializer):
    task_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Suite
        fields = [
            "id",
            "name",
            "title",
            "version",
            "description",
            "source",
            "content_hash",
            "evaluation_only",
            "task_count",
            "created_at",
            "updated_at",
        ]


class SuiteDetailOutput(SuiteOutput):
    domains = DomainOutput(many=True, read_only=True)

    class Meta(SuiteOutput.Meta):
        fields = [*SuiteOutput.Meta.fields, "domains"]


class TaskOutput(serializers.ModelSerializer):
    suite = serializers.IntegerField(source="suite_id", read_only=True)
    domain = serializers.CharField(source="domain.name", read_only=True)
    tags = serializers.ListField(child=serializers.CharField(), read_only=True)

    class Meta:
        model = Task
        fields = [
            "id",
            "suite",
            "task_id",
            "domain",
            "title",
            "tags",
            "content_hash",
            "validation",
            "updated_at",
        ]


class TaskDetailOutput(TaskOutput):
    spec = serializers.JSONField(
        read_only=True, help_text="The full task: query, initial-state patch, golden trajectory, checks."
    )
    policy = serializers.CharField(source="domain.policy", read_only=True)

    class Meta(TaskOutput.Meta):
        fields = [*TaskOutput.Meta.fields, "validation_detail", "policy", "spec"]


class TaskFilter(serializers.Serializer):
    domain = serializers.CharField(required=False, help_text="Domain name, e.g. retail.")
    validation = serializers.ChoiceField(choices=Task.Validation.choices, required=False)
    tag = serializers.CharField(required=False, help_text="Only tasks carrying this tag.")
    page = serializers.IntegerField(required=False, min_value=1)
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=200)


class PageFilter(serializers.Serializer):
    page = serializers.IntegerField(required=False, min_value=1)
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=200)


def _suites(user):
    """Shared suites and the user's teams' own (a suite made from imported results is one team's)."""
    return suites_visible_to(user).annotate(task_count=Count("tasks")).order_by("name")


class SuiteListView(ApiView):
    @api_schema(
        summary="List suites",
        operation_id="suites_list",
        tags=TAGS,
        parameters=[PageFilter],
        responses={200: paginated(SuiteOutput)},
        errors=(400, 401, 403, 404),
    )
    def get(self, request):
        self.validated_query(PageFilter)
        return self.paginate(_suites(request.user), SuiteOutput)


class SuiteDetailView(ApiView):
    @api_schema(
        summary="One suite with its domains",
        tags=TAGS,
        responses={200: SuiteDetailOutput},
        errors=(401, 403, 404),
    )
    def get(self, request, pk: int):
        suite = get_object_or_404(_suites(request.user).prefetch_related("domains"), pk=pk)
        return Response(SuiteDetailOutput(suite).data)


class SuiteTaskListView(ApiView):
    @api_schema(
        summary="List a suite's tasks",
        tags=TAGS,
        parameters=[TaskFilter],
        responses={200: paginated(TaskOutput)},
    )
    def get(self, request, pk: int):
        suite = get_object_or_404(suites_visible_to(request.user), pk=pk)
        query = self.validated_query(TaskFilter)
        tasks = Task.objects.filter(suite=suite).select_related("domain").order_by("task_id")
        if query.get("domain"):
            tasks = tasks.filter(domain__name=query["domain"])
        if query.get("validation"):
            tasks = tasks.filter(validation=query["validation"])
        if query.get("tag"):
            # Tags are a short JSON list; filtering in Python keeps this portable across SQLite and PostgreSQL.
            tagged = [task for task in tasks if query["tag"] in (task.tags or [])]
            return self.paginate(tagged, TaskOutput)
        return self.paginate(tasks, TaskOutput)


class TaskDetailView(ApiView):
    @api_schema(
        summary="One task with its full spec and domain policy",
        tags=TAGS,
        responses={200: OpenApiResponse(TaskDetailOutput)},
        errors=(401, 403, 404),
    )
    def get(self, request, pk: int):
        task = get_object_or_404(tasks_visible_to(request.user).select_related("domain"), pk=pk)
        return Response(TaskDetailOutput(task).data)
