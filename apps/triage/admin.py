from django.contrib import admin

from apps.triage.models import (
    AttemptReview,
    AuditEntry,
    Label,
    RubricVerdict,
    SuiteValidation,
    SuspectDecision,
    TaskHealthIssue,
    TaskValidation,
)


@admin.register(Label)
class LabelAdmin(admin.ModelAdmin):
    list_display = ("name", "shortcut", "flags_task_health", "position")
    list_editable = ("shortcut", "flags_task_health", "position")


@admin.register(AttemptReview)
class AttemptReviewAdmin(admin.ModelAdmin):
    list_display = ("attempt", "status", "assignee", "updated_at")
    list_filter = ("status",)
    raw_id_fields = ("attempt",)


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    list_display = ("at", "actor", "attempt", "field", "before", "after")
    list_filter = ("field",)
    raw_id_fields = ("attempt", "task")

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # the trail is append-only


@admin.register(TaskHealthIssue)
class TaskHealthIssueAdmin(admin.ModelAdmin):
    list_display = ("task", "label", "opened_at", "resolved_at")
    raw_id_fields = ("task", "attempt")


@admin.register(SuiteValidation)
class SuiteValidationAdmin(admin.ModelAdmin):
    list_display = ("suite", "status", "requested_by", "requested_at", "total", "disagreements")
    list_filter = ("status",)


@admin.register(TaskValidation)
class TaskValidationAdmin(admin.ModelAdmin):
    list_display = ("task", "status", "disagreements", "validated_at")
    list_filter = ("status",)
    raw_id_fields = ("task", "run")


@admin.register(SuspectDecision)
class SuspectDecisionAdmin(admin.ModelAdmin):
    list_display = ("task", "decision", "kinds", "decided_by", "decided_at")
    list_filter = ("decision",)
    raw_id_fields = ("task", "issue")


@admin.register(RubricVerdict)
class RubricVerdictAdmin(admin.ModelAdmin):
    list_display = ("attempt", "position", "judge_key", "judge_answer", "human_answer", "labelled_by")
    list_filter = ("human_answer",)
    raw_id_fields = ("attempt",)
