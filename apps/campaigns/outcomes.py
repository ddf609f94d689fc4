"""What a worker records on an Attempt row: the engine's result flattened onto the row's columns."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from apps.campaigns.models import Attempt
from apps.core.text import without_nul
from tb_engine.results import AttemptResult
from tb_engine.signatures import signature_of_result
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
        # SPEC §8: every record path (the ORM one, attempt_sql's one-query one, imports) writes
        # these fields, so a failed attempt is never stored without its signature.
        signature = signature_of_result(stored)
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

    def as_fields(self) -> dict[str, Any]:
        """The row's columns; text with NUL characters (PostgreSQL refuses them) shown as ␀."""
        return {
            "status": self.status,
            "termination": self.termination,
            "verdict": self.verdict,
            "categories": without_nul(self.categories),
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
            "signature": self.signature,
            "signature_items": self.signature_items,
            "duration_ms": self.duration_ms,
            "result": without_nul(self.result),
            "error_detail": without_nul(self.error_detail),
            "provider": without_nul(self.provider),
        }
