"""The attempt record: attempts, their failure signatures, and per-task counts (SPEC §5, §8).

The tables keep the names they had when the campaigns app owned them (Meta.db_table): the move
(migrations attempts 0001, campaigns 0011) changed Django's state, not the database. The campaign
is referenced by name ("campaigns.Campaign"): this app sits below campaigns and never imports it.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db import models

from apps.suites.models import Task


class Attempt(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        INFRA_ERROR = "infra_error", "Infrastructure error"
        CANCELLED = "cancelled", "Cancelled"

    class Verdict(models.TextChoices):
        PASS = "pass", "Pass"
        FAIL = "fail", "Fail"
        # A rubric the judge could not answer and nothing else failed (SPEC §2): excluded from
        # every success metric like an infra error, counted as missing coverage.
        UNJUDGED = "unjudged", "Unjudged"

    campaign = models.ForeignKey("campaigns.Campaign", on_delete=models.CASCADE, related_name="attempts")
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="attempts")
    index = models.PositiveIntegerField()
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    termination = models.CharField(max_length=20, blank=True)
    verdict = models.CharField(max_length=10, choices=Verdict.choices, blank=True)
    categories = models.JSONField(default=list, blank=True)
    clean_looking = models.BooleanField(default=False)
    task_hash = models.CharField(max_length=64, blank=True)
    # Denormalised so dashboards filter and sum without reading result JSON. Usage and cost are
    # the attempt's *billed* totals: its run of record plus every superseded run below.
    input_tokens = models.BigIntegerField(default=0)
    cached_input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    reasoning_tokens = models.BigIntegerField(default=0)
    eval_tokens = models.BigIntegerField(default=0)
    agent_cost = models.DecimalField(max_digits=14, decimal_places=8, null=True, blank=True)
    eval_cost = models.DecimalField(max_digits=14, decimal_places=8, null=True, blank=True)
    tool_calls = models.PositiveIntegerField(default=0)
    diff_items = models.PositiveIntegerField(default=0)
    # A failed attempt's failure signature (SPEC §8) lives in its AttemptSignature row, outside
    # this wide row: a backfill writes narrow rows instead of a new version of every attempt.
    duration_ms = models.FloatField(default=0.0)
    result = models.JSONField(
        default=dict, blank=True, help_text="AttemptResult.to_dict(): transcript, diff, checks…"
    )
    # What the endpoint said about the model that answered: one entry per distinct identity
    # {"model", "system_fingerprint", "headers", "calls"} (empty for simulated and golden agents).
    provider = models.JSONField(default=list, blank=True)
    # Runs of this attempt that ended in an infrastructure error and were superseded by a retry
    # or a resume (SPEC §5: infra-error attempts are billed): one entry per run with its usage,
    # costs (decimal strings, None when unpriced), error and end time
    # (apps.attempts.outcomes.superseded_run). The token and cost columns include them.
    superseded_runs = models.JSONField(default=list, blank=True)
    error_detail = models.TextField(blank=True)
    retries = models.PositiveIntegerField(default=0)
    worker = models.CharField(max_length=200, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "campaigns_attempt"
        ordering = ["campaign", "task", "index"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "task", "index"], name="attempt_unique_triple"),
        ]
        indexes = [
            models.Index(fields=["campaign", "status"], name="attempt_campaign_status"),
            # Dispatch walks a campaign's queued attempts in (index, task) order.
            models.Index(fields=["campaign", "status", "index", "task"], name="attempt_dispatch_order"),
            models.Index(fields=["status", "lease_expires_at"], name="attempt_status_lease"),
            models.Index(fields=["campaign", "clean_looking"], name="attempt_campaign_clean"),
        ]

    def __str__(self) -> str:
        return f"{self.campaign_id}:{self.task_id}#{self.index}"

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def signature(self) -> str:
        """The failure signature's digest ("" when the attempt has none: not failed, or not signed yet)."""
        row = self._signature_row()
        return row.digest if row else ""

    @property
    def signature_items(self) -> list[list[str]]:
        """The signature's elements with their phrases ([] without a signature)."""
        row = self._signature_row()
        return row.variant.items if row else []

    def _signature_row(self) -> AttemptSignature | None:
        try:
            return self.failure_signature
        except AttemptSignature.DoesNotExist:
            return None


# Attempts a campaign still waits for.
IN_FLIGHT = (Attempt.Status.QUEUED, Attempt.Status.RUNNING)


def campaign_model() -> Any:
    """The campaign model, reached through Attempt's foreign key: this app never imports apps.campaigns.

    For its table name and status values (the claim, record and heartbeat statements require a
    running campaign); the campaign's rows are read here, never written. Typed Any: naming its class
    would mean importing the app above this one.
    """
    return Attempt._meta.get_field("campaign").related_model


class TaskSummary(models.Model):
    """Per-(campaign, task) counts kept current as attempts finish (SPEC §5: n_t, c_t)."""

    campaign = models.ForeignKey("campaigns.Campaign", on_delete=models.CASCADE, related_name="summaries")
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="summaries")
    n_done = models.PositiveIntegerField(default=0, help_text="Done and judged (unjudged ones are coverage).")
    n_pass = models.PositiveIntegerField(default=0)
    n_infra_error = models.PositiveIntegerField(default=0)
    n_unjudged = models.PositiveIntegerField(default=0)
    n_cancelled = models.PositiveIntegerField(default=0)
    n_clean_looking = models.PositiveIntegerField(default=0)
    input_tokens = models.BigIntegerField(default=0)
    cached_input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    reasoning_tokens = models.BigIntegerField(default=0)
    eval_tokens = models.BigIntegerField(default=0)
    agent_cost = models.DecimalField(max_digits=16, decimal_places=8, default=Decimal(0))
    eval_cost = models.DecimalField(max_digits=16, decimal_places=8, default=Decimal(0))
    unpriced_attempts = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)
    # When the pair's failure signatures were last rewritten without its counts changing (a backfill):
    # what the cluster and suspect caches' stamps read besides updated_at. Kept apart from updated_at so
    # that stored figures, which read the counts only, stay valid across a backfill.
    signatures_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "campaigns_tasksummary"
        constraints = [models.UniqueConstraint(fields=["campaign", "task"], name="summary_unique_pair")]

    def __str__(self) -> str:
        return f"{self.campaign_id}:{self.task_id} {self.n_pass}/{self.n_done}"


class SignatureCount(models.Model):
    """Failed attempts per (campaign, task, failure signature, termination), kept current with TaskSummary.

    SPEC §8's clusters grouped from a table a fraction of the attempt heap's size: the grouped
    triage view and the cluster page read it instead of aggregating attempts. Recomputed (not
    incremented) from the pair's attempts wherever the pair's TaskSummary is
    (apps.attempts.summaries), so it always equals a recount.
    """

    # No database constraint: derived rows, recounted from AttemptSignature (see its docstring);
    # Django's on_delete removes them with their campaign or task.
    campaign = models.ForeignKey(
        "campaigns.Campaign", on_delete=models.CASCADE, related_name="signature_counts", db_constraint=False
    )
    task = models.ForeignKey(
        Task, on_delete=models.CASCADE, related_name="signature_counts", db_constraint=False
    )
    signature = models.CharField(max_length=32, blank=True)
    termination = models.CharField(max_length=20, blank=True)
    failures = models.PositiveIntegerField(default=0)  # done, verdict fail
    # Named like Model.clean(), which this count row never uses (it is written by SQL, not forms).
    clean = models.PositiveIntegerField(default=0)  # type: ignore[assignment]  # of them, clean-looking
    # Smallest and largest attempt id among the failures (and among the clean-looking ones): examples.
    first_id = models.BigIntegerField()
    last_id = models.BigIntegerField()
    first_clean_id = models.BigIntegerField(null=True)
    last_clean_id = models.BigIntegerField(null=True)

    class Meta:
        db_table = "campaigns_signaturecount"
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "task", "signature", "termination"], name="signature_count_unique"
            ),
        ]
        indexes = [models.Index(fields=["signature", "campaign"], name="signature_count_signature")]

    def __str__(self) -> str:
        return (
            f"{self.campaign_id}:{self.task_id} {self.signature or '-'} {self.termination}: {self.failures}"
        )


class SignatureVariant(models.Model):
    """One stored form of a failure signature: its elements with the phrases of one set of values.

    Immutable and shared: the ~95k failed attempts of a 200k-attempt comparison have ~15k distinct
    forms, so an attempt's signature row points here instead of carrying the JSON. ``items`` is
    tb_engine.signatures.Signature.items(); ``items_hash`` names it (apps.attempts.signature_rows).
    """

    digest = models.CharField(max_length=32)
    items = models.JSONField(default=list)
    items_hash = models.CharField(max_length=64, unique=True)

    class Meta:
        db_table = "campaigns_signaturevariant"

    def __str__(self) -> str:
        return f"{self.digest} #{self.pk}"


class AttemptSignature(models.Model):
    """SPEC §8: the failure signature of one failed attempt (status done, verdict fail).

    A narrow row beside the attempt, written with the attempt's result on every record path and by
    the backfill. It repeats the attempt's campaign, task, termination and clean-looking flag (all
    fixed once the attempt is done) so clusters and SignatureCount are counted without reading the
    attempt heap. Only failed attempts have one; a done attempt is never re-run, so it never goes stale.

    Its foreign keys have no database constraint (like SignatureCount's): the rows are derived,
    written in the attempt's own transaction from ids the writer just read, and Django's on_delete
    still removes them with their attempt, campaign or task. Checking four constraints per row cost
    ~1.2 s of a 5.4 s backfill of 95k attempts (bench/clusters.py).
    """

    attempt = models.OneToOneField(
        Attempt,
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="failure_signature",
        db_constraint=False,
    )
    campaign = models.ForeignKey(
        "campaigns.Campaign", on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False
    )
    task = models.ForeignKey(
        Task, on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False
    )
    digest = models.CharField(max_length=32)
    variant = models.ForeignKey(
        SignatureVariant, on_delete=models.PROTECT, related_name="+", db_index=False, db_constraint=False
    )
    termination = models.CharField(max_length=20, blank=True)
    clean_looking = models.BooleanField(default=False)

    class Meta:
        db_table = "campaigns_attemptsignature"
        indexes = [
            # SignatureCount recounts of a pair or a campaign.
            models.Index(fields=["campaign", "task"], name="attempt_signature_pair"),
            # A cluster's attempts across the visible campaigns (cluster page, "N others failed the same way").
            models.Index(fields=["digest", "campaign"], name="attempt_signature_digest"),
        ]

    def __str__(self) -> str:
        return f"{self.attempt_id}: {self.digest}"


class AttemptProcessRisk(models.Model):
    """The process findings of one done attempt (tb_engine.process; docs/process_risk.md).

    A narrow row beside the attempt, like AttemptSignature: only attempts with at least one finding
    have one, written from the result's ``extra["process"]`` when the attempt is recorded and by the
    backfill (``manage.py backfill_process_risk``). Findings never change the verdict: ``passed``
    repeats it (fixed once the attempt is done) so "passed with process risk" is counted per campaign
    and per kind without reading the attempt heap. The per-kind columns count findings.
    """

    attempt = models.OneToOneField(
        Attempt, on_delete=models.CASCADE, primary_key=True, related_name="process_risk", db_constraint=False
    )
    campaign = models.ForeignKey(
        "campaigns.Campaign", on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False
    )
    task = models.ForeignKey(
        Task, on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False
    )
    passed = models.BooleanField(default=False)
    write_reverted = models.PositiveIntegerField(default=0)
    outside_footprint = models.PositiveIntegerField(default=0)
    write_before_required_step = models.PositiveIntegerField(default=0)
    findings = models.JSONField(default=list, blank=True)  # tb_engine.process.Finding.to_dict() each
    coverage = models.CharField(max_length=20, blank=True)  # value_log | writes | net_effects

    class Meta:
        indexes = [models.Index(fields=["campaign", "passed"], name="process_risk_campaign_passed")]

    def __str__(self) -> str:
        return f"{self.attempt_id}: {len(self.findings)} process finding(s)"


class SummaryVersion(models.Model):
    """A campaign's summary version: a counter the database bumps whenever a count of one of its
    TaskSummary rows changes (triggers of migration 0005, on every write path: the recording's recount,
    bulk updates, re-grades, imports, raw SQL). Pages key cached figures by it, read in one small
    query, where the sums over every summary row of the campaign used to cost ~15 ms of PostgreSQL per
    leaderboard request at 20 campaigns (bench/dashboard_concurrency.py). A signature backfill, which
    only sets signatures_at, leaves it alone.

    No foreign key: the trigger writes it while Django's delete collector may be removing a campaign
    (a constraint would then fail the delete); a deleted campaign's row is a harmless leftover.
    """

    campaign_id = models.BigIntegerField(primary_key=True)
    version = models.BigIntegerField(default=0)

    class Meta:
        db_table = "campaigns_summaryversion"

    def __str__(self) -> str:
        return f"{self.campaign_id}: v{self.version}"


class SummaryRevision(models.Model):
    """A campaign's summary revision: a counter the database bumps on every write that changes one of
    its TaskSummary rows — a count, updated_at (every recount of a recorded, re-graded or cancelled
    attempt writes it) or signatures_at (a signature backfill) — triggers of migration 0006, on every
    write path. SummaryVersion ignores signatures_at (stored figures read counts only); what reads the
    failure signatures (the triage cluster index, its pages) keys its caches by this one instead of
    aggregating every summary row of the scope (~50,000 rows at 100 campaigns) per request.

    No foreign key, for the reason SummaryVersion has none.
    """

    campaign_id = models.BigIntegerField(primary_key=True)
    revision = models.BigIntegerField(default=0)

    class Meta:
        db_table = "campaigns_summaryrevision"

    def __str__(self) -> str:
        return f"{self.campaign_id}: r{self.revision}"
