"""Triage over the API: the label taxonomy (read) and an attempt's review (read; triager writes).

Writes go through apps.triage.services, which check the triager role themselves and write
the audit trail, so the API and the drilldown share one gate and one history.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.http import Http404
from rest_framework import serializers
from rest_framework.response import Response

from apps.api.base import ApiView, api_schema, paginated
from apps.api.views_catalog import PageFilter
from apps.attempts.models import Attempt
from apps.attempts.selectors.reviewed_attempts import attempt_for_review_api
from apps.campaigns.selectors import campaigns_visible_to
from apps.core.roles import Role
from apps.triage import services
from apps.triage.models import AttemptReview, AuditEntry, Label
from apps.triage.selectors import audit_trail, review_of, triagers_of

TAGS = ["triage"]


class LabelOutput(serializers.ModelSerializer):
    class Meta:
        model = Label
        fields = ["id", "name", "description", "shortcut", "flags_task_health"]


class LabelListView(ApiView):
    @api_schema(
        summary="The failure-label taxonomy",
        tags=TAGS,
        parameters=[PageFilter],
        operation_id="triage_labels_list",
        responses={200: paginated(LabelOutput)},
    )
    def get(self, request):
        self.validated_query(PageFilter)
        return self.paginate(Label.objects.all(), LabelOutput)


class AuditOutput(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor.username", allow_null=True, read_only=True)
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)

    class Meta:
        model = AuditEntry
        fields = ["at", "actor", "field", "before", "after"]


class ReviewOutput(serializers.Serializer):
    attempt = serializers.IntegerField()
    labels = serializers.ListField(child=serializers.CharField(), help_text="Label names, sorted.")
    note = serializers.CharField(allow_blank=True)
    assignee = serializers.CharField(allow_null=True, help_text="Username of the assigned triager.")
    status = serializers.ChoiceField(choices=AttemptReview.Status.choices)
    audit = AuditOutput(many=True, help_text="Newest first: who changed what, before -> after.")


class ReviewInput(serializers.Serializer):
    labels = serializers.ListField(
        child=serializers.CharField(max_length=100),
        required=False,
        help_text="Replaces the attempt's labels (names from the taxonomy).",
    )
    note = serializers.CharField(required=False, allow_blank=True, max_length=20000)
    assignee = serializers.CharField(
        required=False,
        allow_null=True,
        max_length=150,
        help_text="Username of a triager in the campaign's team; null clears.",
    )
    status = serializers.ChoiceField(choices=AttemptReview.Status.choices, required=False)

    def validate_labels(self, names: list[str]) -> list[Label]:
        found = {label.name: label for label in Label.objects.filter(name__in=names)}
        unknown = sorted(set(names) - set(found))
        if unknown:
            raise serializers.ValidationError(f"unknown label(s): {', '.join(unknown)}")
        return [found[name] for name in dict.fromkeys(names)]

    def validate_assignee(self, username: str | None):
        if username is None:
            return None
        allowed = {user.get_username(): user for user in triagers_of(self.context["attempt"].campaign)}
        if username not in allowed:
            raise serializers.ValidationError(f"{username} is not a triager of this campaign's team")
        return allowed[username]


def _attempt_for(user, pk: int) -> Attempt:
    attempt = attempt_for_review_api(pk=pk, campaigns=campaigns_visible_to(user))
    if attempt is None:
        raise Http404("no such attempt")
    return attempt


def _review_data(attempt: Attempt) -> dict:
    review = review_of(attempt)
    return {
        "attempt": attempt.pk,
        "labels": sorted(label.name for label in review.labels.all()) if review else [],
        "note": review.note if review else "",
        "assignee": review.assignee.get_username() if review and review.assignee else None,
        "status": review.status if review else AttemptReview.Status.OPEN,
        "audit": audit_trail(attempt=attempt),
    }


class AttemptReviewView(ApiView):
    roles = {"PATCH": Role.TRIAGER}

    @api_schema(
        summary="An attempt's triage review and audit trail",
        tags=TAGS,
        responses={200: ReviewOutput},
        errors=(401, 403, 404),
    )
    def get(self, request, pk: int):
        return Response(ReviewOutput(_review_data(_attempt_for(request.user, pk))).data)

    @api_schema(
        summary="Label, annotate, assign or close an attempt's review (triager)",
        tags=TAGS,
        request=ReviewInput,
        responses={200: ReviewOutput},
        errors=(400, 401, 403, 404),
    )
    def patch(self, request, pk: int):
        attempt = _attempt_for(request.user, pk)
        data = self.validated_body(ReviewInput, attempt=attempt)
        try:
            with transaction.atomic():
                if "labels" in data:
                    services.attempt_set_labels(attempt=attempt, labels=data["labels"], actor=request.user)
                if "note" in data:
                    services.attempt_set_note(attempt=attempt, note=data["note"], actor=request.user)
                if "assignee" in data:
                    services.attempt_assign(attempt=attempt, assignee=data["assignee"], actor=request.user)
                if "status" in data:
                    services.attempt_set_status(attempt=attempt, status=data["status"], actor=request.user)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(
                exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
            ) from exc
        return Response(ReviewOutput(_review_data(attempt)).data)
