"""Drift watches: a configuration re-run on a schedule and compared with its baseline and its previous run.

A watch's runs are ordinary campaigns (apps.campaigns); a WatchRun links one and keeps what its
evaluation found (figures, Δ with interval and noise floor against the baseline and the previous
run, per-task flips, the model identities the endpoint reported) and whether it raised an alert.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.agents.models import AgentConfig, PriceSheet
from apps.campaigns.models import Campaign
from apps.suites.models import Suite, Task


class Watch(models.Model):
    class Trigger(models.TextChoices):
        SCHEDULE = "schedule", "Schedule"
        PROVIDER_CHANGE = "provider_change", "Provider change"
        MANUAL = "manual", "Run now"

    name = models.CharField(max_length=200)
    team = models.ForeignKey("core.Team", on_delete=models.PROTECT, related_name="watches")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="watches")
    agent = models.ForeignKey(AgentConfig, on_delete=models.PROTECT, related_name="watches")
    suite = models.ForeignKey(Suite, on_delete=models.PROTECT, related_name="watches")
    # Empty: every gradable task of the suite at the time of each run.
    tasks = models.ManyToManyField(Task, related_name="watches", blank=True)
    n_attempts = models.PositiveIntegerField(default=5)
    # Exactly one of the two: every N minutes, or a five-field crontab (minute hour day month weekday).
    interval_minutes = models.PositiveIntegerField(null=True, blank=True)
    cron = models.CharField(max_length=100, blank=True)
    baseline = models.ForeignKey(
        Campaign, null=True, blank=True, on_delete=models.SET_NULL, related_name="baseline_of_watches"
    )
    user_simulator = models.JSONField(default=dict, blank=True)
    judge = models.JSONField(default=dict, blank=True)
    price_sheet = models.ForeignKey(PriceSheet, null=True, blank=True, on_delete=models.PROTECT)
    # Between runs, ask the endpoint every this many minutes which model answers (0: never).
    probe_minutes = models.PositiveIntegerField(default=60)
    webhook = models.BooleanField(default=True, help_text="Post alerts to the webhook URL of the settings.")
    enabled = models.BooleanField(default=True)
    next_run_at = models.DateTimeField(null=True, blank=True)
    # Why the next run is due early (a provider change seen by a probe or by the last run); "" = schedule.
    pending_trigger = models.CharField(max_length=20, blank=True)
    last_probe_at = models.DateTimeField(null=True, blank=True)
    last_probe = models.JSONField(default=dict, blank=True)  # identity or {"error": ...}
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "pk"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="watch_unique_name_per_team")]
        indexes = [models.Index(fields=["enabled", "next_run_at"], name="watch_due")]

    def __str__(self) -> str:
        return self.name

    @property
    def schedule_text(self) -> str:
        if self.interval_minutes:
            minutes = self.interval_minutes
            if minutes % 1440 == 0:
                return "every day" if minutes == 1440 else f"every {minutes // 1440} days"
            if minutes % 60 == 0:
                return "every hour" if minutes == 60 else f"every {minutes // 60} hours"
            return "every minute" if minutes == 1 else f"every {minutes} minutes"
        return f"cron {self.cron}"


class WatchRun(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        EVALUATING = "evaluating", "Evaluating"
        DONE = "done", "Evaluated"
        FAILED = "failed", "Not evaluated"

    watch = models.ForeignKey(Watch, on_delete=models.CASCADE, related_name="runs")
    campaign = models.OneToOneField(Campaign, on_delete=models.PROTECT, related_name="watch_run")
    number = models.PositiveIntegerField()
    trigger = models.CharField(max_length=20, choices=Watch.Trigger.choices)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RUNNING)
    started_at = models.DateTimeField()
    evaluated_at = models.DateTimeField(null=True, blank=True)
    # Distinct identities the endpoint reported over the run's attempts:
    # [{"model", "system_fingerprint", "headers", "attempts"}], most frequent first.
    provider = models.JSONField(default=list, blank=True)
    provider_changed = models.BooleanField(default=False)  # differs from the previous run's: a boundary
    # Evaluation: {"figures": {...}, "vs_baseline": {...} | None, "vs_previous": {...} | None}
    result = models.JSONField(default=dict, blank=True)
    alert = models.BooleanField(default=False)
    alert_reasons = models.JSONField(default=list, blank=True)
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    webhook_status = models.CharField(max_length=300, blank=True)
    webhook_sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["watch", "number"]
        constraints = [models.UniqueConstraint(fields=["watch", "number"], name="watch_run_unique_number")]
        indexes = [models.Index(fields=["status"], name="watch_run_status")]

    def __str__(self) -> str:
        return f"{self.watch_id} run {self.number}"

    @property
    def open_alert(self) -> bool:
        return self.alert and self.acknowledged_at is None
