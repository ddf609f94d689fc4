from django.contrib import admin

from apps.adaptive.models import AdaptiveState, Calibration


@admin.register(Calibration)
class CalibrationAdmin(admin.ModelAdmin):
    list_display = ("suite", "team", "version", "n_tasks", "n_campaigns", "created_at")
    list_select_related = ("suite", "team")


@admin.register(AdaptiveState)
class AdaptiveStateAdmin(admin.ModelAdmin):
    list_display = ("campaign", "calibration", "stop_reason", "attempts_used", "budget")
    list_select_related = ("campaign", "calibration")
