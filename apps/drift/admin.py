from django.contrib import admin

from apps.drift.models import Watch, WatchRun


@admin.register(Watch)
class WatchAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "team",
        "agent",
        "n_attempts",
        "interval_minutes",
        "cron",
        "enabled",
        "next_run_at",
    )
    list_filter = ("enabled", "team")


@admin.register(WatchRun)
class WatchRunAdmin(admin.ModelAdmin):
    list_display = ("watch", "number", "campaign", "trigger", "status", "alert", "provider_changed")
    list_filter = ("status", "alert", "trigger")
