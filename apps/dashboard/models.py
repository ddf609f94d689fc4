"""External benchmark scores a user enters per campaign, shown next to our leaderboard."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ExternalScore(models.Model):
    """One published score (e.g. a vendor's own benchmark figure) for the agent of a campaign."""

    campaign = models.ForeignKey(
        "campaigns.Campaign", on_delete=models.CASCADE, related_name="external_scores"
    )
    benchmark = models.CharField(max_length=100, help_text="e.g. tau-bench retail, SWE-bench Verified")
    score = models.FloatField(help_text="As published; higher is better.")
    entered_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["benchmark", "campaign"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "benchmark"], name="external_score_unique")
        ]

    def __str__(self) -> str:
        return f"{self.benchmark}: {self.score} ({self.campaign_id})"
