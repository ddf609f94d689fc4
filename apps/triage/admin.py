from django.contrib import admin

from apps.triage.models import AttemptReview, AuditEntry, Label, TaskHealthIssue


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
