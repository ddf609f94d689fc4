from django.contrib import admin

from apps.thinkingbox.models import SearchService


@admin.register(SearchService)
class SearchServiceAdmin(admin.ModelAdmin):
    # Only the key's variable name is stored; the key itself stays in the workers' environment.
    list_display = ("suite", "url", "api_key_env", "updated_at")
