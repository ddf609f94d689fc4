from django.contrib import admin

from apps.attempts.models import (
    Attempt,
    AttemptProcessRisk,
    AttemptSignature,
    SignatureCount,
    SignatureVariant,
    SummaryRevision,
    SummaryVersion,
    TaskSummary,
)


@admin.register(Attempt)
class AttemptAdmin(admin.ModelAdmin):
    list_display = (
        "campaign",
        "task",
        "index",
        "status",
        "termination",
        "verdict",
        "clean_looking",
        "retries",
    )
    list_filter = ("status", "verdict", "clean_looking")
    raw_id_fields = ("campaign", "task")


@admin.register(TaskSummary)
class TaskSummaryAdmin(admin.ModelAdmin):
    list_display = ("campaign", "task", "n_done", "n_pass", "n_infra_error")
    raw_id_fields = ("campaign", "task")


@admin.register(SummaryVersion)
class SummaryVersionAdmin(admin.ModelAdmin):
    """Kept by database triggers on the task summaries (migration 0005): shown, never edited here."""

    list_display = ("campaign_id", "version")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(SummaryRevision)
class SummaryRevisionAdmin(SummaryVersionAdmin):
    """Kept by database triggers on the task summaries (migration 0006): shown, never edited here."""

    list_display = ("campaign_id", "revision")


@admin.register(SignatureCount)
class SignatureCountAdmin(admin.ModelAdmin):
    """Derived from the attempts (recounted with the task summaries): shown, never edited here."""

    list_display = ("campaign", "task", "signature", "termination", "failures", "clean")
    raw_id_fields = ("campaign", "task")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class _DerivedAdmin(admin.ModelAdmin):
    """Rows derived from the attempts (written with their results and by the backfill): shown, never edited."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(AttemptSignature)
class AttemptSignatureAdmin(_DerivedAdmin):
    list_display = ("attempt", "campaign", "task", "digest", "termination", "clean_looking")
    list_select_related = ("campaign", "task")
    raw_id_fields = ("attempt", "campaign", "task", "variant")
    search_fields = ("digest",)


@admin.register(SignatureVariant)
class SignatureVariantAdmin(_DerivedAdmin):
    list_display = ("digest", "items_hash")
    search_fields = ("digest",)


@admin.register(AttemptProcessRisk)
class AttemptProcessRiskAdmin(_DerivedAdmin):
    list_display = (
        "attempt",
        "campaign",
        "task",
        "passed",
        "write_reverted",
        "outside_footprint",
        "write_before_required_step",
    )
    list_select_related = ("campaign", "task")
    list_filter = ("passed",)
    raw_id_fields = ("attempt", "campaign", "task")
