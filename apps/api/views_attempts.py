"""Attempts of visible campaigns: a filterable list (no result JSON) and the full detail.

The list never loads the result JSON (transcript, diff), which is where an attempt's bytes
are; the detail returns it split into transcript, diff, effects, checks and rubrics.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers, status
from rest_framework.exceptions import APIException
from rest_framework.response import Response

from apps.api.base import ApiView, api_schema, id_field, paginated
from apps.attempts.models import Attempt
from apps.attempts.selectors.attempt_lists import listed_attempts, visible_attempt
from apps.attempts.selectors.process_risk import attempt_process_findings, passed_with_process_risk_ids
from apps.attempts.selectors.results import StoredResultError, attempt_result
from apps.campaigns.selectors import campaigns_visible_to
from tb_engine.process import FINDING_KINDS
from tb_engine.results import AttemptResult

TAGS = ["attempts"]
# SPEC §3: the classes of diff items plus the two non-state failure kinds.
DIFF_KINDS = ("missing_effect", "extra_effect", "wrong_value")
CATEGORIES = ("missing_effect", "extra_effect", "wrong_value", "rubric_failed", "check_failed")
# The attempt's own columns, shared by the list query (values()) and the serializer.
ATTEMPT_COLUMNS = (
    "index",
    "status",
    "termination",
    "verdict",
    "categories",
    "clean_looking",
    "task_hash",
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "eval_tokens",
    "agent_cost",
    "eval_cost",
    "tool_calls",
    "diff_items",
    "signature",
    "duration_ms",
    "retries",
    "error_detail",
    "started_at",
    "finished_at",
)
# The signature digest lives in the attempt's AttemptSignature row (joined by the attempts selectors).
LIST_FIELDS = (
    "id",
    "campaign_id",
    "task_id",
    "task__task_id",
    "task__domain__name",
    "failure_signature__digest",
    *(name for name in ATTEMPT_COLUMNS if name != "signature"),
)


class UnreadableResult(APIException):
    """A stored result written in a format this version cannot read: named, never guessed at."""

    status_code = status.HTTP_500_INTERNAL_SERVER_ERROR
    default_code = "unreadable_result"


class AttemptOutput(serializers.ModelSerializer):
    campaign = serializers.IntegerField(source="campaign_id", read_only=True)
    task = serializers.IntegerField(source="task_id", read_only=True)
    task_id = serializers.CharField(source="task.task_id", read_only=True, help_text="The task's stable id.")
    domain = serializers.CharField(source="task.domain.name", read_only=True)
    categories = serializers.ListField(child=serializers.ChoiceField(choices=CATEGORIES), read_only=True)
    agent_cost = serializers.DecimalField(
        max_digits=14, decimal_places=8, coerce_to_string=False, read_only=True, allow_null=True
    )
    eval_cost = serializers.DecimalField(
        max_digits=14, decimal_places=8, coerce_to_string=False, read_only=True, allow_null=True
    )
    signature = serializers.CharField(
        read_only=True, help_text="Failure signature digest (SPEC §8); empty unless the attempt failed."
    )

    class Meta:
        model = Attempt
        fields = ["id", "campaign", "task", "task_id", "domain", *ATTEMPT_COLUMNS]


class DiffItemOutput(serializers.Serializer):
    kind = serializers.ChoiceField(choices=DIFF_KINDS)
    table = serializers.CharField()
    key = serializers.CharField()
    field = serializers.CharField(allow_null=True, help_text="null for a whole-row difference.")
    initial = serializers.JSONField(allow_null=True)
    result = serializers.JSONField(allow_null=True)
    golden = serializers.JSONField(allow_null=True)
    written_by = serializers.ListField(
        child=serializers.IntegerField(), help_text="Tool-call indexes that wrote it."
    )


class CheckOutput(serializers.Serializer):
    kind = serializers.CharField()
    description = serializers.CharField()
    passed = serializers.BooleanField()
    detail = serializers.CharField(allow_blank=True)
    forbidden = serializers.BooleanField()
    target = serializers.CharField(
        required=False, allow_blank=True, help_text="What the check is about, without row keys."
    )


class RubricOutput(serializers.Serializer):
    question = serializers.CharField()
    answer = serializers.BooleanField(allow_null=True)
    explanation = serializers.CharField(allow_blank=True)


class EffectOutput(serializers.Serializer):
    op = serializers.ChoiceField(choices=["insert", "update", "delete"])
    table = serializers.CharField()
    key = serializers.CharField()
    field = serializers.CharField(allow_null=True)
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)
    written_by = serializers.ListField(child=serializers.IntegerField())


class TranscriptOutput(serializers.Serializer):
    """tb_engine.transcript.Transcript.to_dict(); its inner records are documented in docs/engine.md."""

    messages = serializers.ListField(
        child=serializers.DictField(), help_text="role, content, turn, at_ms, tool_calls…"
    )
    tool_calls = serializers.ListField(
        child=serializers.DictField(), help_text="Executed calls: index, name, arguments, result, error…"
    )
    agent_usage = serializers.DictField(help_text="Token usage of the agent.")
    user_usage = serializers.DictField(help_text="Token usage of the user simulator.")
    judge_usage = serializers.DictField(help_text="Token usage of the judge.")


class ProcessFindingOutput(serializers.Serializer):
    kind = serializers.ChoiceField(choices=FINDING_KINDS)
    calls = serializers.ListField(child=serializers.IntegerField(), help_text="Tool-call indexes it marks.")
    detail = serializers.CharField()
    table = serializers.CharField(allow_blank=True)
    key = serializers.CharField(allow_blank=True)
    field = serializers.CharField(allow_null=True)
    rule = serializers.CharField(
        allow_blank=True, help_text="The process rule broken (write_before_required_step)."
    )


class ProviderIdentityOutput(serializers.Serializer):
    model = serializers.CharField(allow_null=True, help_text="The response's `model` field.")
    system_fingerprint = serializers.CharField(allow_null=True)
    headers = serializers.DictField(
        child=serializers.CharField(), help_text="Response headers named in TB_PROVIDER_HEADERS (lower-case)."
    )
    calls = serializers.IntegerField(help_text="The attempt's agent calls answered with this identity.")


class AttemptDetailOutput(AttemptOutput):
    provider = ProviderIdentityOutput(
        many=True,
        read_only=True,
        help_text="What the endpoint reported about the model that answered (empty for simulated agents).",
    )
    transcript = serializers.SerializerMethodField()
    diff = serializers.SerializerMethodField()
    effects = serializers.SerializerMethodField()
    checks = serializers.SerializerMethodField()
    rubrics = serializers.SerializerMethodField()
    process = serializers.SerializerMethodField()
    _typed_result: AttemptResult | None = None  # the attempt being represented, read by to_representation

    class Meta(AttemptOutput.Meta):
        fields = [
            *AttemptOutput.Meta.fields,
            "provider",
            "transcript",
            "diff",
            "effects",
            "checks",
            "rubrics",
            "process",
        ]

    def to_representation(self, attempt: Attempt) -> dict[str, Any]:
        # Five fields come from the one stored result: read it, typed, once per attempt.
        try:
            self._typed_result = attempt_result(attempt)
        except StoredResultError as error:
            raise UnreadableResult(error.message) from error
        return super().to_representation(attempt)

    @extend_schema_field(TranscriptOutput)
    def get_transcript(self, attempt: Attempt) -> dict:
        """Messages, executed tool calls (index, name, arguments, result, error) and usage."""
        result = self._typed_result
        return result.transcript.to_dict() if result is not None else {}

    @extend_schema_field(DiffItemOutput(many=True))
    def get_diff(self, attempt: Attempt) -> list[dict[str, Any]]:
        result = self._typed_result
        return [item.to_dict() for item in result.diff] if result is not None else []

    @extend_schema_field(EffectOutput(many=True))
    def get_effects(self, attempt: Attempt) -> list[dict[str, Any]]:
        """S0 -> SR changes: op, table, key, field, before, after, written_by."""
        result = self._typed_result
        return [effect.to_dict() for effect in result.effects] if result is not None else []

    @extend_schema_field(CheckOutput(many=True))
    def get_checks(self, attempt: Attempt) -> list[dict[str, Any]]:
        result = self._typed_result
        return [check.to_dict() for check in result.checks] if result is not None else []

    @extend_schema_field(RubricOutput(many=True))
    def get_rubrics(self, attempt: Attempt) -> list[dict[str, Any]]:
        result = self._typed_result
        return [rubric.to_dict() for rubric in result.rubrics] if result is not None else []

    @extend_schema_field(ProcessFindingOutput(many=True))
    def get_process(self, attempt: Attempt) -> list[dict[str, Any]]:
        """Process findings (docs/process_risk.md); they never change the verdict. Empty: none."""
        found = attempt_process_findings(attempt_id=attempt.pk)
        return [{k: v for k, v in f.items() if k != "label"} for f in found.findings] if found else []


class AttemptFilter(serializers.Serializer):
    campaign = id_field(required=False)
    task = serializers.CharField(
        required=False, max_length=300, help_text="Stable task id (e.g. retail/…) or task pk."
    )
    status = serializers.ChoiceField(choices=Attempt.Status.choices, required=False)
    verdict = serializers.ChoiceField(choices=Attempt.Verdict.choices, required=False)
    category = serializers.ChoiceField(
        choices=CATEGORIES, required=False, help_text="Attempts whose failure categories include it."
    )
    clean_looking = serializers.BooleanField(
        required=False,
        allow_null=True,
        default=None,
        help_text="SPEC §4 clean-looking failures only (true) or none of them (false).",
    )
    process = serializers.ChoiceField(
        choices=["any", *FINDING_KINDS],
        required=False,
        help_text="Passed with process risk: passing attempts with process findings (any, or of this kind).",
    )
    page = id_field(required=False)
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=200)


class AttemptListView(ApiView):
    @api_schema(
        summary="List attempts of your teams' campaigns",
        operation_id="attempts_list",
        tags=TAGS,
        parameters=[AttemptFilter],
        responses={200: paginated(AttemptOutput)},
    )
    def get(self, request):
        query = self.validated_query(AttemptFilter)
        attempts = listed_attempts(
            campaigns=campaigns_visible_to(request.user),
            columns=LIST_FIELDS,
            campaign_id=query.get("campaign"),
            task=query.get("task") or "",
            status=query.get("status") or "",
            verdict=query.get("verdict") or "",
            category=query.get("category") or "",
            clean_looking=query.get("clean_looking"),
        )
        if query.get("process"):
            kind = "" if query["process"] == "any" else query["process"]
            attempts = attempts.filter(
                verdict=Attempt.Verdict.PASS,
                pk__in=passed_with_process_risk_ids(
                    campaign_ids=campaigns_visible_to(request.user).values("pk"), kind=kind
                ),
            )
        return self.paginate(attempts, AttemptOutput)


class AttemptDetailView(ApiView):
    @api_schema(
        summary="One attempt with transcript, diff, effects, checks and rubrics",
        tags=TAGS,
        responses={200: AttemptDetailOutput},
        errors=(401, 403, 404),
    )
    def get(self, request, pk: int):
        attempt = visible_attempt(pk=pk, campaigns=campaigns_visible_to(request.user))
        if attempt is None:
            raise Http404("no such attempt")
        return Response(AttemptDetailOutput(attempt).data)
