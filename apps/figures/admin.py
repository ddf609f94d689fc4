"""Stored figures in the admin, read-only: they are derived from the attempts and rewritten by
figures_refresh, so an edit here would be silently replaced (or, worse, shown until then)."""

from django.contrib import admin

from apps.figures.models import FigureRefresh, StoredFigure


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(StoredFigure)
class StoredFigureAdmin(ReadOnlyAdmin):
    list_display = ("slot", "campaign_id", "version", "computed_at")
    search_fields = ("slot",)
    exclude = ("value",)  # pickled figure objects: bytes, not something to read in a form


@admin.register(FigureRefresh)
class FigureRefreshAdmin(ReadOnlyAdmin):
    list_display = ("campaign_id", "claimed_at", "refreshed_at")
