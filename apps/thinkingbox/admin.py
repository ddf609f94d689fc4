from django.contrib import admin

from apps.thinkingbox.models import SearchService


@admin.register(SearchService)
class SearchServiceAdmin(admin.ModelAdmin):
    """Read-only here: `manage.py thinkingbox_search` sets it and checks the key variable's allow-list."""

    list_display = ("suite", "url", "api_key_env", "updated_at")
    list_select_related = ("suite",)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
