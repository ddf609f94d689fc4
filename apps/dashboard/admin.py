from django.contrib import admin

from apps.dashboard.models import ExternalScore


@admin.register(ExternalScore)
class ExternalScoreAdmin(admin.ModelAdmin):
    list_display = ("benchmark", "campaign", "score", "entered_by", "created_at")
    list_filter = ("benchmark",)
    search_fields = ("benchmark", "campaign__name")
