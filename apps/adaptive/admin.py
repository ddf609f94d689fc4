from django.contrib import admin

from apps.adaptive.models import AdaptiveState, Calibration


@admin.register(Calibration)
class CalibrationAdmin(admin.ModelAdmin):
    list_display = ("suite", "team", "version", "n_tasks", "n_campaigns", "seconds", "created_at")
    list_filter = ("team",)
    # The fitted model and its validation are large JSON documents written by the fit, not by hand.
    readonly_fields = ("campaigns_key", "model", "validation", "seconds", "created_at")


@admin.register(AdaptiveState)
class AdaptiveStateAdmin(admin.ModelAdmin):
    list_display = ("campaign", "calibration", "stop_reason", "attempts_used", "budget", "updated_at")
    list_filter = ("stop_reason",)
    readonly_fields = ("estimate", "updated_at")
