"""Campaigns (their attempts and summaries: apps.attempts; agent configs and price sheets: apps.agents)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.agents.models import AgentConfig, PriceSheet
from apps.core.charts import campaign_colour
from apps.suites.models import Suite, Task


class Campaign(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        CANCELLED = "cancelled", "Cancelled"

    name = models.CharField(max_length=200)
    team = models.ForeignKey("core.Team", on_delete=models.PROTECT, related_name="campaigns")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="campaigns")
    agent = models.ForeignKey(AgentConfig, on_delete=models.PROTECT, related_name="campaigns")
    suite = models.ForeignKey(Suite, on_delete=models.PROTECT, related_name="campaigns")
    tasks = models.ManyToManyField(Task, related_name="campaigns", blank=True)
    n_attempts = models.PositiveIntegerField(default=20)
    window = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Attempts queued or running at once (empty: TB_CAMPAIGN_DEFAULT_WINDOW), "
        "never above TB_CAMPAIGN_MAX_WINDOW.",
    )
    seed = models.BigIntegerField(default=0)
    user_simulator = models.JSONField(
        default=dict, blank=True, help_text='{"kind": "scripted"} or an endpoint config.'
    )
    judge = models.JSONField(default=dict, blank=True, help_text='{"kind": "keyword"} or an endpoint config.')
    price_sheet = models.ForeignKey(PriceSheet, null=True, blank=True, on_delete=models.PROTECT)
    # The grading engine that runs (or, for an import, ran) the attempts: tb_engine.version.
    harness_version = models.CharField(max_length=50)
    suite_version = models.CharField(max_length=50)
    suite_hash = models.CharField(max_length=64)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.DRAFT)
    # A replicate re-runs another campaign's configuration with a new seed; every replicate points at
    # the set's first campaign, so the set is that campaign and its `replicates`.
    replicate_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="replicates"
    )
    # An adaptive campaign (apps.adaptive) runs a fraction of the N x tasks attempts, chosen as
    # results come in, and its full figures are *estimated* (SPEC §9). Its options are the
    # engine's AdaptiveConfig plus the calibration to use (None: the suite's latest for the team).
    adaptive = models.BooleanField(default=False)
    adaptive_options = models.JSONField(default=dict, blank=True)
    # Non-discriminating tasks (a do-nothing attempt passes them) stay in a campaign unless it asks
    # to leave them out; the figures state which it did, and how many the option left out.
    exclude_non_discriminating = models.BooleanField(default=False)
    # A fault plan (tb_engine.faults.FaultPlan.to_dict(); {} = none) applied to every attempt's
    # tool calls; each attempt stores what fired in result.extra.faults (docs/faults.md).
    fault_plan = models.JSONField(default=dict, blank=True)
    non_discriminating_excluded = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_active(self) -> bool:
        return self.status == self.Status.RUNNING

    @property
    def colour(self) -> str:
        """The campaign's colour on every chart and swatch (apps.core.charts.campaign_colour)."""
        return campaign_colour(self.pk)

    @property
    def is_harness_check(self) -> bool:
        """A golden-replay campaign checks the harness and the tasks; it is never ranked against models."""
        return self.agent.kind == "golden"

    @property
    def non_discriminating_note(self) -> str:
        """What the campaign did with non-discriminating tasks, as its figures state it (one query)."""
        included = self.tasks.filter(validation=Task.Validation.NON_DISCRIMINATING).count()
        return self.non_discriminating_statement(included=included)

    def non_discriminating_statement(self, *, included: int) -> str:
        """The note for a campaign holding ``included`` non-discriminating tasks (e.g. an annotation)."""
        if self.exclude_non_discriminating:
            return f"non-discriminating tasks excluded ({self.non_discriminating_excluded})"
        if not included:
            return "no non-discriminating tasks"
        return f"includes {included} non-discriminating task{'s' if included != 1 else ''}"
