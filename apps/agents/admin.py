from django.contrib import admin

from apps.agents.models import AgentConfig, PriceSheet


@admin.register(AgentConfig)
class AgentConfigAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "model", "base_url", "api_key_env", "max_concurrency")


@admin.register(PriceSheet)
class PriceSheetAdmin(admin.ModelAdmin):
    list_display = ("name", "source", "effective_date")
