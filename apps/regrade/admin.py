"""Re-grades and verdict versions in the admin, read-only: they are written by the re-grade services
(a preview, then apply), and an edit here would bypass the figures' refresh."""

from django.contrib import admin

from apps.regrade.models import RegradeRun, VerdictVersion


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(RegradeRun)
class RegradeRunAdmin(ReadOnlyAdmin):
    list_display = (
        "pk",
        "team",
        "status",
        "grader_version",
        "regraded",
        "not_regradable",
        "created_at",
        "applied_at",
    )
    list_filter = ("status",)
    exclude = ("report", "task_versions")  # large JSON: the re-grade page shows them


@admin.register(VerdictVersion)
class VerdictVersionAdmin(ReadOnlyAdmin):
    list_display = (
        "attempt_id",
        "kind",
        "previous_verdict",
        "verdict",
        "run",
        "grader_version",
        "created_at",
    )
    list_filter = ("kind",)
    raw_id_fields = ("attempt", "run", "campaign")
