"""Suites, domains and tasks as stored copies of engine specs.

A task row is versioned by its content hash: attempts record the hash they ran against, so a
result always names the exact task version even after a re-import changed the task.
"""

from __future__ import annotations

from django.db import models


class Suite(models.Model):
    class Source(models.TextChoices):
        BUILTIN = "builtin", "Built-in"
        THINKINGBOX = "thinkingbox", "ThinkingBox import"

    name = models.SlugField(max_length=100, unique=True)
    title = models.CharField(max_length=200, blank=True)
    version = models.CharField(max_length=50)
    description = models.TextField(blank=True)
    source = models.CharField(max_length=20, choices=Source.choices, default=Source.BUILTIN)
    content_hash = models.CharField(max_length=64)
    evaluation_only = models.BooleanField(
        default=False, help_text="Licence forbids training on these tasks (e.g. ThinkingBox-Bench)."
    )
    team = models.ForeignKey(
        "core.Team",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="suites",
        help_text="Empty: shared with every team (built-in, imported datasets). Set: only this team's "
        "(a suite made from one team's imported results holds its users' messages).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"


class Domain(models.Model):
    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="domains")
    name = models.SlugField(max_length=100)
    title = models.CharField(max_length=200)
    policy = models.TextField(blank=True)
    backend = models.CharField(max_length=20, default="sqlite")
    spec = models.JSONField(
        default=dict, help_text="Tables and tool schemas (tb_engine.spec_json.domain_to_dict)."
    )

    class Meta:
        ordering = ["suite", "name"]
        constraints = [models.UniqueConstraint(fields=["suite", "name"], name="domain_unique_per_suite")]

    def __str__(self) -> str:
        return f"{self.suite.name}/{self.name}"


class Task(models.Model):
    class Validation(models.TextChoices):
        UNKNOWN = "unknown", "Not validated"
        VALID = "valid", "Valid"
        INVALID = "invalid", "Invalid"
        NON_DISCRIMINATING = "non_discriminating", "Non-discriminating"

    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="tasks")
    domain = models.ForeignKey(Domain, on_delete=models.CASCADE, related_name="tasks")
    task_id = models.CharField(
        max_length=300, help_text="Stable id, e.g. retail/ticket_hold_carrier_exception."
    )
    title = models.CharField(max_length=300, blank=True)
    tags = models.JSONField(default=list, blank=True)
    content_hash = models.CharField(max_length=64)
    spec = models.JSONField(help_text="The full task (tb_engine.spec_json.task_to_dict).")
    validation = models.CharField(max_length=20, choices=Validation.choices, default=Validation.UNKNOWN)
    validation_detail = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["suite", "task_id"]
        constraints = [models.UniqueConstraint(fields=["suite", "task_id"], name="task_unique_per_suite")]

    def __str__(self) -> str:
        return self.task_id

    @property
    def is_gradable(self) -> bool:
        """Campaigns may run it: every task but an invalid one (its golden trajectory fails or errors).

        A non-discriminating task is gradable (its grading works; a do-nothing attempt passes it too):
        campaigns keep it unless they exclude such tasks explicitly, and pages flag it.
        """
        return self.validation != self.Validation.INVALID

    @property
    def is_non_discriminating(self) -> bool:
        return self.validation == self.Validation.NON_DISCRIMINATING
