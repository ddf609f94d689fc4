"""Triage of failed attempts: a label taxonomy, one review per attempt, an audit trail, task health."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from apps.attempts.models import Attempt
from apps.suites.models import Task

# Names of the seeded labels whose use puts the task on the task-health list.
GRADER_BUG = "grader bug"
TASK_AMBIGUOUS = "task ambiguous"


class Label(models.Model):
    """One entry of the editable failure taxonomy; `shortcut` is the digit key in the drilldown."""

    name = models.CharField(max_length=100, unique=True)
    description = models.CharField(max_length=300, blank=True)
    shortcut = models.PositiveSmallIntegerField(
        null=True, blank=True, unique=True, help_text="Digit 1-9 that toggles this label in the drilldown."
    )
    flags_task_health = models.BooleanField(
        default=False, help_text="Using this label puts the task on the task-health list (e.g. grader bug)."
    )
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["position", "name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(shortcut__isnull=True) | Q(shortcut__gte=1, shortcut__lte=9),
                name="label_shortcut_digit",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class AttemptReview(models.Model):
    """The triage state of one attempt: labels, note, assignee and open/reviewed."""

    class Status(models.TextChoices):
        OPEN = "open", "Open"
        REVIEWED = "reviewed", "Reviewed"

    attempt = models.OneToOneField(Attempt, on_delete=models.CASCADE, related_name="review")
    labels = models.ManyToManyField(Label, blank=True, related_name="reviews")
    note = models.TextField(blank=True)
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="assigned_reviews",
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"review of {self.attempt_id} ({self.status})"


class AuditEntry(models.Model):
    """One change (who, when, field, before -> after) to an attempt's review or to the taxonomy."""

    attempt = models.ForeignKey(
        Attempt, null=True, blank=True, on_delete=models.CASCADE, related_name="audit_entries"
    )
    task = models.ForeignKey(
        Task, null=True, blank=True, on_delete=models.CASCADE, related_name="audit_entries"
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    at = models.DateTimeField(default=timezone.now)
    field = models.CharField(max_length=50)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-at", "-pk"]
        indexes = [models.Index(fields=["attempt", "-at"], name="audit_attempt_at")]

    def __str__(self) -> str:
        return f"{self.field}: {self.before_text} -> {self.after_text}"

    @staticmethod
    def _text(value) -> str:
        if value in (None, "", []):
            return "—"
        if isinstance(value, list):
            return ", ".join(str(item) for item in value)
        if isinstance(value, dict):
            return ", ".join(f"{key}={item}" for key, item in value.items())
        return str(value)

    @property
    def before_text(self) -> str:
        return self._text(self.before)

    @property
    def after_text(self) -> str:
        return self._text(self.after)


class TaskHealthIssue(models.Model):
    """A task suspected broken: a triager labelled one of its attempts (grader bug, ambiguous), or
    excluded it from the suspect-task queue on the evidence stored with the issue."""

    class Source(models.TextChoices):
        LABEL = "label", "Attempt label"
        SUSPECT = "suspect", "Suspect-task queue"

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="health_issues")
    # The health label used on an attempt (source label); none for an exclusion from the suspect queue.
    label = models.ForeignKey(
        Label, null=True, blank=True, on_delete=models.PROTECT, related_name="health_issues"
    )
    attempt = models.ForeignKey(Attempt, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    opened_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    opened_at = models.DateTimeField(default=timezone.now)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolution = models.CharField(max_length=300, blank=True)
    # Label issues open and close with the labels on the task's attempts; suspect ones only by hand.
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.LABEL)
    evidence = models.JSONField(default=list, blank=True, help_text="Suspect-queue evidence when excluded.")

    class Meta:
        ordering = ["-opened_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["task", "label"],
                condition=Q(resolved_at__isnull=True),
                name="health_one_open_per_task_label",
            ),
            models.UniqueConstraint(
                fields=["task"],
                condition=Q(resolved_at__isnull=True, source="suspect"),
                name="health_one_open_suspect_per_task",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task_id}: {self.title} ({'open' if self.is_open else 'resolved'})"

    @property
    def title(self) -> str:
        """What the issue is: its label's name, or "suspect task" for an exclusion from the suspect queue."""
        label = self.label  # no query when label_id is None
        return label.name if label is not None else "suspect task"

    @property
    def is_open(self) -> bool:
        return self.resolved_at is None


class SuspectDecision(models.Model):
    """A triager's decision on a task of the suspect-task queue, on the evidence shown at the time.

    *dismissed*: the task is fine; it leaves the queue until evidence of a kind not yet dismissed
    appears. *excluded*: a task-health issue (source suspect) was opened, so the health toggle of every
    metric page leaves the task out; resolving that issue puts the task back.
    """

    class Decision(models.TextChoices):
        DISMISSED = "dismissed", "Dismissed: the task is fine"
        EXCLUDED = "excluded", "Excluded from figures"

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="suspect_decisions")
    decision = models.CharField(max_length=10, choices=Decision.choices)
    kinds = models.JSONField(default=list, blank=True, help_text="Evidence kinds on screen when decided.")
    note = models.CharField(max_length=300, blank=True)
    issue = models.ForeignKey(
        TaskHealthIssue, null=True, blank=True, on_delete=models.SET_NULL, related_name="decisions"
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-decided_at", "-pk"]
        indexes = [models.Index(fields=["task", "-decided_at"], name="suspect_task_decided")]

    def __str__(self) -> str:
        return f"{self.task_id}: {self.decision}"


class RubricVerdict(models.Model):
    """A human yes/no on one rubric answer of one attempt, beside the judge's answer (judge calibration).

    ``judge_key`` is the content hash of the judge configuration that gave the answer
    (tb_engine.judges.judge_identity), so calibration is per judge version.
    """

    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="rubric_verdicts")
    position = models.PositiveSmallIntegerField(help_text="Index of the rubric in the attempt's result.")
    question = models.TextField()
    judge_key = models.CharField(max_length=64)
    judge_answer = models.BooleanField(
        null=True, help_text="The judge's answer; null when it could not judge."
    )
    human_answer = models.BooleanField()
    labelled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    labelled_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["attempt", "position"]
        constraints = [
            models.UniqueConstraint(fields=["attempt", "position"], name="rubric_verdict_one_per_answer")
        ]
        indexes = [models.Index(fields=["judge_key"], name="rubric_verdict_judge")]

    def __str__(self) -> str:
        return f"{self.attempt_id}#{self.position}: human {'yes' if self.human_answer else 'no'}"

    @property
    def agrees(self) -> bool | None:
        return None if self.judge_answer is None else self.judge_answer == self.human_answer


class SuiteValidation(models.Model):
    """One request to validate a suite (the suite page's button, ``validate_suite``) and its progress."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    suite = models.ForeignKey("suites.Suite", on_delete=models.CASCADE, related_name="validations")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    total = models.PositiveIntegerField(default=0)
    counts = models.JSONField(default=dict, blank=True, help_text="status -> tasks (valid, invalid, …).")
    disagreements = models.PositiveIntegerField(
        default=0, help_text="Runs where our verdict and the server's hash differ."
    )
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-requested_at", "-pk"]

    def __str__(self) -> str:
        return f"validation of {self.suite_id} ({self.status})"

    @property
    def checked(self) -> int:
        return sum(self.counts.values())


class TaskValidation(models.Model):
    """The outcome of validating one task version: golden twice and do-nothing on the task's own backend.

    ``runs`` keeps each run's verdict, our state verdict beside the server's hash verdict, and both
    diffs (ours classified, the server's positional one) — the task-health page shows them.
    """

    class Status(models.TextChoices):
        VALID = "valid", "Valid"
        INVALID = "invalid", "Invalid"
        NON_DISCRIMINATING = "non_discriminating", "Non-discriminating"
        UNKNOWN = "unknown", "Not validated (infrastructure error)"

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="validations")
    run = models.ForeignKey(
        SuiteValidation, null=True, blank=True, on_delete=models.SET_NULL, related_name="tasks"
    )
    task_hash = models.CharField(max_length=64)
    status = models.CharField(max_length=20, choices=Status.choices)
    problems = models.JSONField(default=list, blank=True)
    rubrics_note = models.CharField(max_length=200, blank=True)
    runs = models.JSONField(default=list, blank=True)
    disagreements = models.PositiveIntegerField(default=0)
    validated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    validated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-validated_at", "-pk"]
        indexes = [models.Index(fields=["task", "-validated_at"], name="taskvalidation_task_at")]

    def __str__(self) -> str:
        return f"{self.task_id}: {self.status}"
