"""What a worker records on an Attempt row: the engine's result flattened onto the row's columns."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from apps.attempts.models import Attempt
from apps.attempts.process_rows import ProcessRow, process_row
from apps.attempts.signature_rows import SignatureRow
from apps.core.text import without_nul
from tb_engine.results import AttemptResult
from tb_engine.signatures import signature_of_attempt
from tb_engine.transcript import Usage


@dataclass
class AttemptOutcome:
    """What gets written to the Attempt row."""

    status: str
    termination: str = ""
    verdict: str = ""
    categories: list[str] = field(default_factory=list)
    clean_looking: bool = False
    task_hash: str = ""
    agent_usage: Usage = field(default_factory=Usage)
    eval_usage: Usage = field(default_factory=Usage)
    agent_cost: Decimal | None = None
    eval_cost: Decimal | None = None
    tool_calls: int = 0
    diff_items: int = 0
    signature: str = ""
    signature_items: list[list[str]] = field(default_factory=list)
    duration_ms: float = 0.0
    result: dict[str, Any] = field(default_factory=dict)
    error_detail: str = ""
    provider: list[dict[str, Any]] = field(default_factory=list)  # identities the endpoint reported

    @classmethod
    def infra_error(cls, message: str) -> AttemptOutcome:
        return cls(status=Attempt.Status.INFRA_ERROR, error_detail=message)

    @classmethod
    def from_result(
        cls, result: AttemptResult, *, agent_cost: Decimal | None, eval_cost: Decimal | None
    ) -> AttemptOutcome:
        transcript = result.transcript
        eval_usage = transcript.user_usage + transcript.judge_usage
        stored = result.to_dict()
        # SPEC §8: every record path (the ORM one, attempt_sql's one-query one, imports) stores
        # signature_row() with the result, so a failed attempt is never stored without its signature.
        # Signed from the typed result in hand: reading the stored dict back would cost a full parse.
        signature = signature_of_attempt(result)
        return cls(
            status=result.status,
            termination=result.termination or "",
            verdict=result.verdict or "",
            categories=list(result.categories),
            clean_looking=result.clean_looking,
            task_hash=result.task_hash,
            agent_usage=transcript.agent_usage,
            eval_usage=eval_usage,
            agent_cost=agent_cost,
            eval_cost=eval_cost,
            tool_calls=len(transcript.tool_calls),
            diff_items=len(result.diff),
            signature=signature.digest if signature else "",
            signature_items=signature.items() if signature else [],
            duration_ms=result.duration_ms,
            result=stored,
            error_detail=result.error,
            provider=list(result.extra.get("provider") or []),
        )

    def as_fields(self, *, json_nul_shown: bool = True) -> dict[str, Any]:
        """The row's columns; text with NUL characters (PostgreSQL refuses them) shown as ␀.

        ``json_nul_shown=False`` leaves the JSON columns as they are, for a caller that shows their
        NULs as it encodes them (``bulk_insert.encoded_json``: one pass over the value instead of two).
        """
        shown = without_nul if json_nul_shown else _as_it_is
        return {
            "status": self.status,
            "termination": self.termination,
            "verdict": self.verdict,
            "categories": shown(self.categories),
            "clean_looking": self.clean_looking,
            "task_hash": self.task_hash,
            "input_tokens": self.agent_usage.input_tokens,
            "cached_input_tokens": self.agent_usage.cached_input_tokens,
            "output_tokens": self.agent_usage.output_tokens,
            "reasoning_tokens": self.agent_usage.reasoning_tokens,
            "eval_tokens": self.eval_usage.total_tokens,
            "agent_cost": self.agent_cost,
            "eval_cost": self.eval_cost,
            "tool_calls": self.tool_calls,
            "diff_items": self.diff_items,
            "duration_ms": self.duration_ms,
            "result": shown(self.result),
            "error_detail": without_nul(self.error_detail),
            "provider": shown(self.provider),
        }

    def process_row(self, *, attempt_id: int, campaign_id: int, task_id: int) -> ProcessRow | None:
        """The attempt's process-risk row (tb_engine.process findings), None when it has no finding."""
        return process_row(
            attempt_id=attempt_id,
            campaign_id=campaign_id,
            task_id=task_id,
            status=self.status,
            verdict=self.verdict,
            result=self.result,
        )

    def signature_row(self, *, attempt_id: int, campaign_id: int, task_id: int) -> SignatureRow | None:
        """The attempt's AttemptSignature row (SPEC §8) for this outcome; None when it did not fail."""
        if not self.signature:
            return None
        return SignatureRow(
            attempt_id=attempt_id,
            campaign_id=campaign_id,
            task_id=task_id,
            digest=self.signature,
            items=without_nul(self.signature_items),
            termination=self.termination,
            clean_looking=self.clean_looking,
        )


def _as_it_is(value: Any) -> Any:
    return value


# --- Superseded runs: every run the endpoint answered stays billed (SPEC §5) ----------------------
#
# An attempt that ends in an infrastructure error is re-run (a retry within the budget, or a
# resume); the re-run's record would overwrite the usage of the run it supersedes. Each superseded
# run is kept as an entry of Attempt.superseded_runs and the attempt's usage and cost columns hold
# the billed totals (superseded runs + the run of record). Every sum over those columns (task
# summaries, hence campaign cost, cost pages, the procurement export and what-if prices) is what
# was spent; n_t and c_t never count a superseded run, so pass@k, pass^k and all-N are unchanged,
# and cost per success / per dependable task keep SPEC §5's definition (campaign agent cost, which
# includes every billed run, over Σ c_t or the all-N count). Cost per attempt is campaign agent
# cost over attempts: what one attempt cost with its retries.

USAGE_FIELDS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens", "eval_tokens")
COST_FIELDS = ("agent_cost", "eval_cost")
_ERROR_KEPT = 500  # characters of a superseded run's error kept with it


def superseded_run(fields: dict[str, Any], *, error: str, at: str, reason: str) -> dict[str, Any]:
    """One superseded run as stored: its usage and costs (``fields`` as in ``as_fields``), error, when, why."""
    entry: dict[str, Any] = {name: int(fields.get(name) or 0) for name in USAGE_FIELDS}
    for name in COST_FIELDS:
        cost = fields.get(name)
        entry[name] = None if cost is None else str(Decimal(cost))
    entry.update(error=without_nul(error or "")[:_ERROR_KEPT], at=at, reason=reason)
    return entry


def _agent_tokens(values: dict[str, Any]) -> int:
    return int(values.get("input_tokens") or 0) + int(values.get("output_tokens") or 0)


def _eval_tokens(values: dict[str, Any]) -> int:
    return int(values.get("eval_tokens") or 0)


def _cost_total(parts: list[tuple[Decimal | None, int]]) -> Decimal | None:
    """Sum of the runs' costs; None (unpriced) when a run with tokens is unpriced or nothing is priced.

    A partial sum would pass for the whole bill, so an unpriced run makes the total unpriced.
    """
    priced = [cost for cost, _ in parts if cost is not None]
    if not priced or any(cost is None and tokens for cost, tokens in parts):
        return None
    return sum(priced, Decimal(0))


def billed_fields(own: dict[str, Any] | None, superseded: list[dict[str, Any]]) -> dict[str, Any]:
    """The usage and cost columns billed for an attempt: its run of record ``own`` (None: none yet) plus ``superseded``."""
    runs = [*superseded, *([own] if own is not None else [])]
    fields: dict[str, Any] = {name: sum(int(run.get(name) or 0) for run in runs) for name in USAGE_FIELDS}
    for name, tokens in (("agent_cost", _agent_tokens), ("eval_cost", _eval_tokens)):
        parts = [(None if run.get(name) is None else Decimal(run[name]), tokens(run)) for run in runs]
        fields[name] = _cost_total(parts)
    return fields


def last_run(billed: dict[str, Any], superseded: list[dict[str, Any]]) -> dict[str, Any]:
    """The usage and costs of the run of record: the billed columns minus the superseded runs."""
    own: dict[str, Any] = {
        name: int(billed.get(name) or 0) - sum(int(run.get(name) or 0) for run in superseded)
        for name in USAGE_FIELDS
    }
    for name in COST_FIELDS:
        total = billed.get(name)
        earlier = [Decimal(run[name]) for run in superseded if run.get(name) is not None]
        own[name] = None if total is None else Decimal(total) - sum(earlier, Decimal(0))
    return own
