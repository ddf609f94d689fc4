"""Versioned verdicts (issue 29): a re-grade's preview verdicts and the verdicts they replaced.

A re-grade (RegradeRun) grades stored attempts again against the task definitions and grader of
now. Each attempt whose grading would change gets a *preview* VerdictVersion; the attempt row keeps
its verdict until an operator applies the run. Applying writes the new grading onto the attempt
(so every figure uses it) and keeps the one it replaces as an ``original`` (the grading as run) or
``superseded`` (an earlier applied re-grade) version: old verdicts stay readable.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class RegradeRun(models.Model):
    class Status(models.TextChoices):
        PREVIEW = "preview", "Preview"
        APPLIED = "applied", "Applied"

    team = models.ForeignKey("core.Team", on_delete=models.CASCADE, related_name="regrade_runs")
    campaigns = models.ManyToManyField("campaigns.Campaign", related_name="regrade_runs")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PREVIEW)
    grader_version = models.CharField(max_length=50)
    # task pk -> {"task_id", "hash"}: the task definitions the run graded against.
    task_versions = models.JSONField(default=dict, blank=True)
    # tb_engine.regrade_impact figures per campaign, ranks, reversals, counts (computed at preview).
    report = models.JSONField(default=dict, blank=True)
    regraded = models.PositiveIntegerField(default=0)
    not_regradable = models.PositiveIntegerField(default=0)
    duration_s = models.FloatField(default=0.0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    applied_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    applied_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"re-grade #{self.pk} ({self.status})"


class VerdictVersion(models.Model):
    class Kind(models.TextChoices):
        ORIGINAL = "original", "As run"
        PREVIEW = "preview", "Preview"
        APPLIED = "applied", "Applied"
        SUPERSEDED = "superseded", "Superseded"
        NOT_REGRADABLE = "not_regradable", "Not re-gradable"

    # No database constraint (like the attempt record's derived rows): removed with the attempt by
    # Django's on_delete, written from ids just read.
    attempt = models.ForeignKey(
        "attempts.Attempt", on_delete=models.CASCADE, related_name="verdict_versions", db_constraint=False
    )
    run = models.ForeignKey(
        RegradeRun, null=True, blank=True, on_delete=models.CASCADE, related_name="versions"
    )
    # The attempt's campaign, repeated (fixed once the attempt is done) for per-campaign reads.
    campaign = models.ForeignKey(
        "campaigns.Campaign", on_delete=models.CASCADE, related_name="+", db_constraint=False
    )
    kind = models.CharField(max_length=16, choices=Kind.choices)
    previous_verdict = models.CharField(max_length=10, blank=True)  # the attempt's verdict when graded
    verdict = models.CharField(max_length=10, blank=True)
    categories = models.JSONField(default=list, blank=True)
    clean_looking = models.BooleanField(default=False)
    diff = models.JSONField(default=list, blank=True)
    checks = models.JSONField(default=list, blank=True)
    rubrics = models.JSONField(default=list, blank=True)
    task_hash = models.CharField(max_length=64, blank=True)
    grader_version = models.CharField(max_length=50, blank=True)
    reason = models.TextField(blank=True)  # why not re-gradable
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["attempt_id", "pk"]
        indexes = [models.Index(fields=["run", "kind"], name="verdict_version_run_kind")]

    def __str__(self) -> str:
        return f"{self.attempt_id} {self.kind}: {self.verdict or self.reason[:40]}"
