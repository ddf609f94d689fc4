from django.contrib import admin

from apps.campaigns.models import Campaign


@admin.register(Campaign)
class CampaignAdmin(admin.ModelAdmin):
    list_display = ("name", "agent", "suite", "n_attempts", "status", "team", "created_at")
    list_filter = ("status", "team")
