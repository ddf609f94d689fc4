"""Calibrations of a suite (item response models, versioned by the campaigns they used) and the
state of each adaptive campaign's dispatcher (its stop reason and latest estimate)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.campaigns.models import Campaign
from apps.suites.models import Suite


class Calibration(models.Model):
    """One fit of tb_engine.irt on a team's stored campaigns of a suite."""

    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="calibrations")
    team = models.ForeignKey("core.Team", on_delete=models.CASCADE, related_name="calibrations")
    version = models.PositiveIntegerField(help_text="1, 2, … per suite and team.")
    campaigns = models.ManyToManyField(Campaign, related_name="calibrations")
    # sha256 of the campaigns used and how many done attempts each had: the same data, the same key.
    campaigns_key = models.CharField(max_length=64)
    dimensions = models.JSONField(default=list, help_text="One ability for all tasks, or one per domain.")
    n_tasks = models.PositiveIntegerField(default=0)
    n_campaigns = models.PositiveIntegerField(default=0)
    model = models.JSONField(help_text="tb_engine.irt.Calibration.to_dict()")
    validation = models.JSONField(
        null=True, blank=True, help_text="Leave-one-campaign-out replay (tb_engine.irt.Validation.to_dict())."
    )
    seconds = models.FloatField(default=0.0, help_text="Wall time of the fit.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["suite", "team", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["suite", "team", "version"], name="calibration_unique_version"),
            models.UniqueConstraint(
                fields=["suite", "team", "campaigns_key"], name="calibration_unique_campaigns"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.suite.name} calibration v{self.version}"


class AdaptiveState(models.Model):
    """What the dispatcher of one adaptive campaign last decided, and the campaign's latest estimate."""

    campaign = models.OneToOneField(Campaign, on_delete=models.CASCADE, related_name="adaptive_state")
    calibration = models.ForeignKey(
        Calibration, null=True, blank=True, on_delete=models.PROTECT, related_name="adaptive_states"
    )
    stop_reason = models.CharField(max_length=30, blank=True, help_text="target_se | budget | settled | …")
    attempts_used = models.PositiveIntegerField(default=0)
    budget = models.PositiveIntegerField(default=0)
    se_pass_at_1 = models.FloatField(null=True, blank=True)
    se_all_n = models.FloatField(null=True, blank=True)
    decisions = models.PositiveIntegerField(default=0)
    estimate = models.JSONField(
        null=True, blank=True, help_text="tb_engine.irt.estimate_figures(); estimated"
    )
    estimate_attempts = models.PositiveIntegerField(default=0, help_text="Done attempts the estimate used.")
    detail = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"adaptive state of campaign {self.campaign_id}"
